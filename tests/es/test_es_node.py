"""Smoke test of the real test node: the Elasticsearch features the duplicate filter relies on."""

from __future__ import annotations

import json
import urllib.request

import pytest
from elasticsearch import Elasticsearch

pytestmark = pytest.mark.es

DOCS = {
    "a": {"title": "北京今日发布暴雨红色预警", "cluster": "c1", "band": "b1:3fa2", "seq": 1},
    "b": {"title": "北京今天发布暴雨红色预警信号", "cluster": "c1", "band": "b1:3fa2", "seq": 2},
    "c": {"title": "上海举办国际进口博览会", "cluster": "c2", "band": "b1:91c0", "seq": 3},
}


def _create_ops(index: str, docs: dict[str, dict[str, object]]) -> list[dict[str, object]]:
    ops: list[dict[str, object]] = []
    for doc_id, source in docs.items():
        ops.append({"create": {"_index": index, "_id": doc_id}})
        ops.append(source)
    return ops


def test_cluster_health_over_plain_http(es_url: str) -> None:
    with urllib.request.urlopen(f"{es_url}/_cluster/health?wait_for_status=yellow&timeout=30s") as resp:
        health = json.load(resp)
    assert health["status"] in {"yellow", "green"}
    assert health["number_of_nodes"] >= 1


def test_create_conflict_terms_and_collapse(es_client: Elasticsearch, index: str) -> None:
    es_client.indices.create(
        index=index,
        settings={"number_of_shards": 1, "number_of_replicas": 0},
        mappings={
            "properties": {
                "title": {"type": "text"},
                "cluster": {"type": "keyword"},
                "band": {"type": "keyword"},
                "seq": {"type": "integer"},
            }
        },
    )

    first = es_client.bulk(operations=_create_ops(index, DOCS), refresh="wait_for")
    assert not first["errors"], first["items"]
    assert [item["create"]["status"] for item in first["items"]] == [201, 201, 201]

    again = es_client.bulk(operations=_create_ops(index, {"a": DOCS["a"]}), refresh="wait_for")
    assert again["errors"]
    assert again["items"][0]["create"]["status"] == 409

    by_band = es_client.search(index=index, query={"terms": {"band": ["b1:3fa2", "b9:0000"]}}, sort=["seq"])
    assert [hit["_id"] for hit in by_band["hits"]["hits"]] == ["a", "b"]
    assert by_band["hits"]["hits"][0]["_source"]["title"] == DOCS["a"]["title"]

    collapsed = es_client.search(index=index, collapse={"field": "cluster"}, sort=["seq"])
    assert [(hit["_id"], hit["fields"]["cluster"]) for hit in collapsed["hits"]["hits"]] == [
        ("a", ["c1"]),
        ("c", ["c2"]),
    ]
