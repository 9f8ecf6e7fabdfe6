"""Chinese search that finds: the example site ingested, multi-word queries with known answers, on the real node.

The minimal distribution has no analysis plugin, so this is the ``jieba`` preset: words segmented here,
the built-in ``whitespace`` analyzer there.  For contrast the same queries run on the text field as the
standard analyzer indexes it (one character at a time), which is what every index got before.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from elasticsearch import Elasticsearch

from es_plugin.commands.ingest import ingest
from es_plugin.commands.search import folded_search
from es_plugin.index.template import template_name
from examples.site.generate import generate
from scrapy_zhdedup.config import DedupConfig, EsConfig
from scrapy_zhdedup.text.clean import TextCleaner
from tests.support.zhtexts import news_page

# query -> the base article (manifest "base") whose pages answer it
QUERIES = {
    "小轿车 起火": "inews-train-0013",
    "公务员 考试 减免": "inews-train-1144",
    "全程 高铁": "inews-test-0348",
    "投诉 手机": "inews-train-3001",
    "停车 城管": "inews-train-3810",
    "正骨 医院": "inews-test-0711",
    "大巴 客车": "inews-train-1699",
    "慰问 老干部": "inews-train-4758",
}
PAGE = 10


@pytest.fixture(scope="module")
def site_index(es_url: str, es_client: Elasticsearch, tmp_path_factory: pytest.TempPathFactory) -> Iterator[
        tuple[str, dict[str, str]]]:
    """The example site's pages ingested (annotate mode); page path -> base article."""
    work = tmp_path_factory.mktemp("site")
    manifest = generate(work / "public")
    index = f"zhdedup-test-chinese-{work.name.lower()}"
    es = EsConfig(es_url=es_url, es_index=index, es_dead_letter=str(work / "dead.jsonl"))
    ingest([work / "public"], DedupConfig(), es, checkpoint_dir=work / "ck")
    es_client.indices.refresh(index=index)
    yield index, {path: page["base"] for path, page in manifest["pages"].items()}
    es_client.indices.delete(index=index)
    es_client.options(ignore_status=404).indices.delete_index_template(name=template_name(index))


def first_page_precision(hits: list[dict[str, Any]], bases: dict[str, str], base: str) -> float:
    """Share of the first page's groups that are the article asked for (an empty page counts 0)."""
    return sum(bases.get(h["doc_id"]) == base for h in hits) / len(hits) if hits else 0.0


@pytest.mark.es
def test_multi_word_queries_find_their_article(es_client: Elasticsearch, site_index: tuple[str, dict[str, str]]) -> None:
    index, bases = site_index
    precision = {}
    for query, base in QUERIES.items():
        result = folded_search(es_client, index, query, size=PAGE)
        precision[query] = first_page_precision(result["hits"], bases, base)
        assert result["hits"] and bases.get(result["hits"][0]["doc_id"]) == base, (query, result["hits"][:3])
    print("first-page precision, jieba words:", json.dumps(precision, ensure_ascii=False))
    assert sum(precision.values()) / len(precision) >= 0.9


@pytest.mark.es
def test_words_beat_single_characters(es_client: Elasticsearch, site_index: tuple[str, dict[str, str]]) -> None:
    index, bases = site_index
    words, chars = [], []
    for query, base in QUERIES.items():
        words.append(first_page_precision(folded_search(es_client, index, query, size=PAGE)["hits"], bases, base))
        by_char = {"bool": {"must": [{"multi_match": {"query": query, "fields": ["title", "text"],
                                                      "operator": "and"}}]}}  # the standard analyzer
        chars.append(first_page_precision(folded_search(es_client, index, by_char, size=PAGE)["hits"], bases, base))
    print(f"mean first-page precision over {len(QUERIES)} queries: words {sum(words) / len(words):.3f}, "
          f"characters {sum(chars) / len(chars):.3f}")
    assert sum(words) > sum(chars)


@pytest.mark.es
def test_the_index_is_mapped_for_search(es_client: Elasticsearch, site_index: tuple[str, dict[str, str]]) -> None:
    index, _ = site_index
    mapping = es_client.indices.get_mapping(index=index)[index]["mappings"]["properties"]
    assert mapping["id"]["type"] == mapping["path"]["type"] == mapping["url"]["type"] == "keyword"
    assert mapping["text"]["type"] == "text"
    assert mapping["zhdedup"]["properties"]["words"] == {"type": "text", "analyzer": "whitespace"}
    settings = es_client.indices.get_settings(index=index)[index]["settings"]["index"]
    assert settings["auto_expand_replicas"] == "0-1"
    assert es_client.cluster.health(index=index)["status"] == "green"  # one node: no unassigned replica






@pytest.mark.es
def test_the_pages_own_text_is_stored_and_either_script_finds_it(es_url: str, es_client: Elasticsearch, index: str,
                                                                  tmp_path: Path) -> None:
    """A Hong Kong page in traditional characters and a mainland one in simplified: each stored as written
    (script, full-width punctuation), both found by 臺風 and by 台风 (through the normalised words)."""
    hong_kong = ("強烈颱風「山竹」今日下午在香港以南約一百公里掠過，天文台懸掛十號颶風信號。"
                 "全港學校停課，渡輪及巴士服務暫停，市民應留在安全地方，遠離海旁。")
    page = news_page("颱風山竹襲港", hong_kong)
    mainland = ("今年第二十号台风今天下午在海南文昌沿海登陆，登陆时中心附近最大风力十二级。"
                "省气象台提醒沿海渔船回港避风，海口、三亚两地机场部分航班取消。")
    src = tmp_path / "pages.jsonl"
    src.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in (
        {"id": "hk", "html": page}, {"id": "cn", "text": mainland})), encoding="utf-8")
    es = EsConfig(es_url=es_url, es_index=index, es_dead_letter=str(tmp_path / "dead.jsonl"))
    report = ingest([src], DedupConfig(), es, checkpoint_dir=tmp_path / "ck", workers=2)
    assert report["unique"] == 2
    stored = {hit["_id"]: hit["_source"] for hit in es_client.search(index=index, query={"match_all": {}})["hits"]["hits"]}
    texts = {source["zhdedup"]["doc_id"]: source["text"] for source in stored.values()}
    assert texts == {"hk": TextCleaner().cleaned(html=page).written, "cn": mainland}
    assert hong_kong in texts["hk"] and "颱風" in texts["hk"] and "，" in texts["hk"]  # not 台风, not ","
    assert all("台风" in source["zhdedup"]["words"].split() for source in stored.values())  # normalised words
    for query in ("臺風", "台风", "颱風"):
        found = {hit["doc_id"] for hit in folded_search(es_client, index, query)["hits"]}
        assert found == {"hk", "cn"}, query
    assert {h["doc_id"] for h in folded_search(es_client, index, "颱風 香港")["hits"]} == {"hk"}
