"""``zhdedup es replay --output``: the items a crawl could not judge are delivered once judged, in the crawl's
mode, and marked delivered in its ledger; one a re-crawl delivered meanwhile is not delivered twice."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from elasticsearch import Elasticsearch

from es_plugin.commands.replay import replay
from scrapy_zhdedup.config import DedupConfig, EsConfig
from scrapy_zhdedup.errors import InputError
from scrapy_zhdedup.pipelines.delivery import DeliveryLedger
from tests.support.helpers import write_jsonl

pytestmark = pytest.mark.es

FIRST = "北京市气象台今天发布暴雨蓝色预警，预计今天夜间到明天白天本市大部分地区有中到大雨，局地暴雨，请市民注意出行安全。"
OTHER = "上海市教委宣布，全市中小学将于九月一日正式开学，各校需提前做好校园防疫和安全检查工作，家长需配合完成健康登记。"
LATER = "广州地铁十八号线南延段今日开通试运营，沿线居民前往市中心的通勤时间将缩短约二十分钟，首班车六点发出。"


def lookup_line(index: str, doc_id: str, text: str, mode: str) -> dict[str, Any]:
    """A dead-letter line as a crawl writes it for an item it could not judge."""
    return {"time": "2026-11-27T00:00:00.000+00:00", "index": index, "stage": "lookup", "mode": mode, "op": None,
            "_id": None, "doc_id": doc_id, "status": None, "reason": "ConnectionError", "retryable": True,
            "document": {"url": doc_id, "title": doc_id.upper(), "text": text}}


def crawl_left(tmp_path: Path, index: str, ids: list[str], delivered: list[str]) -> None:
    """A crawl's ledger as it ends: ``ids`` noted before judging, ``delivered`` struck off."""
    ledger = DeliveryLedger(tmp_path, index)
    ledger.open()
    for doc_id in ids:
        ledger.note(doc_id)
    for doc_id in delivered:
        ledger.done(doc_id)
    ledger.close()


def undelivered(tmp_path: Path, index: str) -> set[str]:
    ledger = DeliveryLedger(tmp_path, index)
    ledger.open()
    ledger.close()
    return ledger.undelivered


def config(url: str, index: str) -> EsConfig:
    return EsConfig(es_url=url, es_index=index)


@pytest.mark.parametrize("mode", ["drop", "annotate"])
def test_replay_delivers_what_the_crawl_did_not_in_its_mode(es_url: str, es_client: Elasticsearch, index: str,
                                                            tmp_path: Path, mode: str) -> None:
    dead = tmp_path / "dead.jsonl"
    ids = ["u/first", "u/copy", "u/other", "u/recrawled"]
    write_jsonl(dead, [lookup_line(index, "u/first", FIRST, mode), lookup_line(index, "u/copy", FIRST, mode),
                       lookup_line(index, "u/other", OTHER, mode), lookup_line(index, "u/recrawled", LATER, mode)])
    crawl_left(tmp_path, index, ids, delivered=["u/recrawled"])  # a re-crawl met it and delivered it already
    out = tmp_path / "delivered.jsonl"

    report = replay(dead, DedupConfig(), config(es_url, index), output=out)  # no --mode: the lines' own

    assert report["mode"] == mode
    items = {item["url"]: item for item in map(json.loads, out.read_text(encoding="utf-8").splitlines())}
    if mode == "drop":
        assert set(items) == {"u/first", "u/other"}  # the repeat is dropped, as the crawl would have
        assert items["u/first"] == {"url": "u/first", "title": "U/FIRST", "text": FIRST}
    else:
        assert set(items) == {"u/first", "u/copy", "u/other"}
        assert (items["u/copy"]["dedup_status"], items["u/copy"]["dup_of"]) == ("exact", "u/first")
        assert items["u/first"]["dedup_status"] == "unique"
    assert report["delivered"] == len(items)
    es_client.indices.refresh(index=index)
    statuses = [h["_source"]["zhdedup"]["status"] for h in es_client.search(index=index, size=10)["hits"]["hits"]]
    assert sorted(statuses) == (["unique"] * 3 if mode == "drop" else ["exact", "unique", "unique", "unique"])
    assert undelivered(tmp_path, index) == set()  # a re-crawl drops them as delivered by an earlier run

    again = replay(dead, DedupConfig(), config(es_url, index), output=out)  # a second replay: nothing to do
    assert (again["replayed"], again["delivered"]) == (0, 0)
    assert len(out.read_text(encoding="utf-8").splitlines()) == len(items)


def test_without_output_the_items_stay_undelivered_for_the_next_crawl(es_url: str, index: str,
                                                                     tmp_path: Path) -> None:
    dead = tmp_path / "dead.jsonl"
    write_jsonl(dead, [lookup_line(index, "u/first", FIRST, "drop")])
    crawl_left(tmp_path, index, ["u/first"], delivered=[])
    assert replay(dead, DedupConfig(), config(es_url, index))["unique"] == 1
    assert undelivered(tmp_path, index) == {"u/first"}


def test_lines_of_both_modes_need_mode(es_url: str, index: str, tmp_path: Path) -> None:
    dead = tmp_path / "dead.jsonl"
    write_jsonl(dead, [lookup_line(index, "u/first", FIRST, "drop"), lookup_line(index, "u/other", OTHER, "annotate")])
    with pytest.raises(InputError, match=r"both modes.*--mode"):
        replay(dead, DedupConfig(), config(es_url, index))
