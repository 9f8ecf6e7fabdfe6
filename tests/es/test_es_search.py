"""Folded search (collapse on ``zhdedup.cluster``) over real Chinese news with reposts, on the real node."""

from __future__ import annotations

import json
import math
import random
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from elasticsearch import Elasticsearch

from es_plugin.commands.dedup_index import dedup_index
from es_plugin.commands.search import folded_query_body, folded_search, iter_folded, query_clause
from es_plugin.errors import EsRequestError
from es_plugin.flavour import server_of
from scrapy_zhdedup.config import DedupConfig
from scrapy_zhdedup.errors import ZhDedupError
from tests.support.zhtexts import articles, edit_chars, with_attribution

pytestmark = pytest.mark.es

FIELDS = ("title", "text")


@pytest.fixture(scope="module")
def index(es_client: Elasticsearch) -> Iterator[str]:
    """40 articles, 12 of them reposted 1-3 times (same title, edited text), deduplicated in place."""
    name = f"zhdedup-test-search-{uuid.uuid4().hex[:12]}"
    es_client.indices.create(index=name, settings={"number_of_shards": 2, "number_of_replicas": 0},
                             mappings={"properties": {"title": {"type": "text"}, "text": {"type": "text"}}})
    rng = random.Random(3)
    ops: list[dict[str, Any]] = []
    for i, a in enumerate(articles(40)):
        copies = [a.text] + [f(a.text) for f in (with_attribution, lambda t, i=i: edit_chars(t, 2, i),
                                                 lambda t: t + "\n（完）")[: rng.randint(1, 3) if i < 12 else 0]]
        for j, text in enumerate(copies):
            ops += [{"index": {"_index": name, "_id": f"a{i}-{j}"}}, {"title": a.title, "text": text}]
    es_client.bulk(operations=ops, refresh=True)
    dedup_index(es_client, name, DedupConfig())
    yield name
    es_client.indices.delete(index=name)


def matching(client: Elasticsearch, index: str, query: str) -> list[dict[str, Any]]:
    """Every matching document, unfolded, best first (the same scoring as the folded search)."""
    body = folded_query_body(query, size=1000, fields=FIELDS)
    del body["collapse"], body["aggs"]
    return client.search(index=index, body=body)["hits"]["hits"]


def common_word(client: Elasticsearch, index: str) -> str:
    """A word in many documents, so that results span several pages."""
    return max(("中国", "记者", "发展", "工作", "公司", "问题"), key=lambda w: len(matching(client, index, w)))


def test_first_page_before_and_after_folding(es_client: Elasticsearch, index: str) -> None:
    query = common_word(es_client, index)
    docs = matching(es_client, index, query)
    clusters = Counter(h["_source"]["zhdedup"]["cluster"] for h in docs)
    plain_page = [h["_source"]["zhdedup"]["cluster"] for h in docs[:10]]
    assert len(set(plain_page)) < len(plain_page)  # unfolded, reposts take places on page one

    result = folded_search(es_client, index, query, size=10)
    page = [h["cluster"] for h in result["hits"]]
    assert len(page) == len(set(page)) == 10
    assert result["total_hits"] == len(docs) and result["total_groups"] == len(clusters) and result["groups_exact"]
    assert result["pages"] == math.ceil(len(clusters) / 10)
    for hit in result["hits"]:
        assert hit["folded"] == clusters[hit["cluster"]] - 1 and hit["duplicates"] == []
    assert any(hit["folded"] for hit in result["hits"])


def test_pages_repeat_and_lose_no_group(es_client: Elasticsearch, index: str) -> None:
    query = common_word(es_client, index)
    clusters = Counter(h["_source"]["zhdedup"]["cluster"] for h in matching(es_client, index, query))
    pages = folded_search(es_client, index, query, size=3)["pages"]
    assert pages > 3
    seen = [h["cluster"] for page in range(1, pages + 1)
            for h in folded_search(es_client, index, query, page=page, size=3)["hits"]]
    assert len(seen) == len(set(seen)) == len(clusters) and set(seen) == set(clusters)
    assert folded_search(es_client, index, query, page=pages + 1, size=3)["hits"] == []

    if not server_of(es_client).collapse_search_after:  # Elasticsearch 7.x, OpenSearch: one line instead
        with pytest.raises(EsRequestError, match="cannot page a collapsed search"):
            list(iter_folded(es_client, index, query, batch=4, fields=FIELDS))
        return
    walked = list(iter_folded(es_client, index, query, batch=4, fields=FIELDS))
    assert [g["cluster"] for g in walked] == sorted(clusters)
    assert sum(1 + g["folded"] for g in walked) == sum(clusters.values())


def test_inner_hits_show_the_folded_duplicates(es_client: Elasticsearch, index: str) -> None:
    query = common_word(es_client, index)
    cluster_of = {h["_source"]["zhdedup"]["doc_id"]: h["_source"]["zhdedup"]["cluster"]
                  for h in matching(es_client, index, query)}
    result = folded_search(es_client, index, query, size=20, inner_hits=2)
    shown = 0
    for hit in result["hits"]:
        assert len(hit["duplicates"]) == min(2, hit["folded"])
        for dup in hit["duplicates"]:
            assert dup["id"] != hit["id"] and cluster_of[dup["doc_id"]] == hit["cluster"]
            assert dup["status"] in ("near", "exact") or hit["status"] != "unique"
            assert dup["source"]["title"] == hit["source"]["title"]
            shown += 1
    assert shown


def test_query_dict_phrase_and_errors(es_client: Elasticsearch, index: str) -> None:
    title = es_client.get(index=index, id="a0-0")["_source"]["title"]
    result = folded_search(es_client, index, {"match_phrase": {"title": title}})
    assert result["hits"][0]["source"]["title"] == title and result["hits"][0]["folded"] >= 1
    body = folded_query_body(title, page=1, size=5, inner_hits=1)
    raw = es_client.search(index=index, body=json.loads(json.dumps(body)))  # the Kibana body as printed
    assert [h["_id"] for h in raw["hits"]["hits"]] == [h["id"] for h in folded_search(
        es_client, index, title, size=5, inner_hits=1)["hits"]]
    assert query_clause({"query": {"match_all": {}}}, FIELDS) == {"match_all": {}}

    with pytest.raises(ZhDedupError, match="page out of range"):
        folded_search(es_client, index, "中国", page=2000, size=10)
    with pytest.raises(ZhDedupError, match="no such index"):
        folded_search(es_client, f"{index}-missing", "中国")
    with pytest.raises(ValueError):
        folded_search(es_client, index, "  ")
