"""Failure handling of the Elasticsearch backend: outages (through a proxy), rejected writes, bad set-up.

The shared node is never stopped or slowed: outages are simulated by breaking :class:`EsProxy`.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from elasticsearch import Elasticsearch

from es_plugin.backend.batchwriter import bulk_parts
from es_plugin.backend.elasticsearch_backend import ElasticsearchBackend
from es_plugin.backend.groupcommit import Entry
from es_plugin.backend.lookups import EsLookups
from es_plugin.backend.registry import Claimant
from es_plugin.backend.retry import RetryPolicy
from es_plugin.backend.stats import EsStats
from es_plugin.backend.writer import Action
from es_plugin.client import check_reachable, make_client
from es_plugin.errors import EsUnavailableError, LookupItemError
from es_plugin.index.template import install, registry_name
from es_plugin.operations import drive
from scrapy_zhdedup.config import DedupConfig, EsConfig
from scrapy_zhdedup.index.bands import BandLayout
from scrapy_zhdedup.index.nearindex import CandidateKeys
from scrapy_zhdedup.similarity.fingerprinter import Fingerprinter
from scrapy_zhdedup.similarity.rule import NearRule
from scrapy_zhdedup.text.clean import TextCleaner, content_hash
from tests.support.es_docs import store
from tests.support.es_proxy import EsProxy
from tests.support.fault_node import free_port
from tests.support.helpers import Stats, backend
from tests.support.waiting import wait_until_async

pytestmark = pytest.mark.es

DEDUP = DedupConfig()
TEXTS = [
    "北京市气象台今天发布暴雨蓝色预警，预计今天夜间到明天白天本市大部分地区有中到大雨，局地暴雨。",
    "上海市教委宣布，全市中小学将于九月一日正式开学，各校需提前做好校园防疫和安全检查工作。",
    "广州地铁十八号线南延段今日开通试运营，沿线居民前往市中心的通勤时间将缩短约二十分钟。",
    "深圳海关近日查获一批走私冻品，共计三百余吨，案值超过两千万元，相关嫌疑人已被依法控制。",
    "杭州西湖景区发布游览提示，国庆假期期间将实行临时交通管制，建议游客绿色出行错峰游览。",
    "成都大熊猫繁育研究基地迎来两只新生幼崽，目前母子平安，工作人员正进行二十四小时监护。",
]


@pytest.fixture
async def proxy(es_url: str) -> AsyncIterator[tuple[EsProxy, str]]:
    p = EsProxy(es_url)
    url = await p.start()
    yield p, url
    await p.close()


async def judge(b: ElasticsearchBackend, i: int, **document: Any) -> str:
    verdict = await b.judge(f"doc-{i}", text=TEXTS[i], html=None, document={"url": f"doc-{i}", **document})
    return verdict.status


def dead_letters(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "dead.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()] if path.exists() else []


async def test_unreachable_at_start_names_the_url(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    b = backend(url, "t-unreachable", tmp_path)
    with pytest.raises(EsUnavailableError, match=rf"Elasticsearch at {url} is not reachable.*ZHDEDUP_ES_URL"):
        await judge(b, 0)
    await b.close()
    with pytest.raises(EsUnavailableError, match=url):
        check_reachable(make_client(EsConfig(es_url=url, es_timeout=2)), url)
    assert dead_letters(tmp_path) == []  # nothing was accepted, so nothing to dead-letter


async def test_outage_mid_run_is_retried(proxy: tuple[EsProxy, str], index: str, tmp_path: Path,
                                         es_client: Elasticsearch) -> None:
    p, url = proxy
    stats = Stats()
    b = backend(url, index, tmp_path, stats=stats, es_timeout=0.5, es_max_retries=10)
    loop = asyncio.get_running_loop()
    try:
        assert await judge(b, 0) == "unique"
        p.cut()  # node "down" during a lookup...
        loop.call_later(0.5, p.restore)
        assert await judge(b, 1) == "unique"
        assert stats["zhdedup/es/retries"] >= 1
        retries = stats["zhdedup/es/retries"]
        p.cut()  # ... and during a bulk write
        loop.call_later(0.5, p.restore)
        await b.flush()
        assert stats["zhdedup/es/retries"] > retries
        p.pause()  # node hanging: requests time out, held bytes arrive late (a bulk may land twice)
        loop.call_later(1.2, p.restore)
        assert await judge(b, 2) == "unique"
        p.pause()
        retries = stats["zhdedup/es/retries"]
        flushing = asyncio.ensure_future(b.flush())
        await wait_until_async(lambda: stats["zhdedup/es/retries"] > retries, "bulk timed out and retried")
        p.restore()
        await flushing
        assert await judge(b, 3) == "unique"
    finally:
        p.restore()
        await b.close()
    assert dead_letters(tmp_path) == [] and "zhdedup/dead_letter" not in stats
    assert stats["zhdedup/es/indexed"] == 4
    es_client.indices.refresh(index=index)
    assert es_client.count(index=index)["count"] == 4


async def test_down_for_good_dead_letters_and_raises(proxy: tuple[EsProxy, str], index: str, tmp_path: Path) -> None:
    p, url = proxy
    stats = Stats()
    b = backend(url, index, tmp_path, stats=stats, es_timeout=0.5, es_max_retries=2, es_outage_timeout=0)
    try:
        for i in range(3):
            assert await judge(b, i) == "unique"  # written before their verdicts were returned
        p.cut()
        with pytest.raises(EsUnavailableError, match=rf"{url} did not answer.*no HTTP status.*dead\.jsonl"):
            await judge(b, 3, extra="kept")
    finally:
        await b.close()
    records = dead_letters(tmp_path)
    assert [(r["stage"], r["doc_id"]) for r in records] == [("lookup", "doc-3")]
    # the item's fields and its cleaned text as written: what a replay judges (the page itself is not kept)
    cleaned = TextCleaner().cleaned(text=TEXTS[3]).written
    assert records[0]["document"] == {"url": "doc-3", "extra": "kept", "text": cleaned} and "，" in cleaned
    assert all(r["reason"] and r["time"] for r in records)
    assert stats["zhdedup/dead_letter"] == 1 and stats["zhdedup/es/errors"] == 1
    assert b.dead_lettered == 1


async def test_read_only_index_dead_letters_after_retries(index: str, es_url: str, tmp_path: Path,
                                                          es_client: Elasticsearch) -> None:
    stats = Stats()
    b = backend(es_url, index, tmp_path, stats=stats, es_max_retries=2)
    try:
        assert await judge(b, 0) == "unique"  # creates the index
        es_client.indices.put_settings(index=index, settings={"index.blocks.write": True})
        assert await judge(b, 1) == "unique"
        await b.flush()
    finally:
        await b.close()
        es_client.indices.put_settings(index=index, settings={"index.blocks.write": False})
    records = dead_letters(tmp_path)
    assert [r["doc_id"] for r in records] == ["doc-1"]  # doc-0 was written before its verdict, before the block
    assert {r["status"] for r in records} == {403} and all("cluster_block_exception" in r["reason"] for r in records)
    assert stats["zhdedup/es/retries"] == 2 and stats["zhdedup/dead_letter"] == 1  # 1 item x 2 retries
    assert stats["zhdedup/es/indexed"] == 1


async def test_mapping_conflict_dead_letters_only_the_bad_document(index: str, es_url: str, tmp_path: Path,
                                                                   es_client: Elasticsearch) -> None:
    install(es_client, index, BandLayout.from_config(DEDUP), {"price": {"type": "integer"}})
    stats = Stats()
    b = backend(es_url, index, tmp_path, stats=stats)
    try:
        assert await judge(b, 0, price="not a number") == "unique"
        assert await judge(b, 1, price=3) == "unique"
    finally:
        await b.close()
    records = dead_letters(tmp_path)
    assert len(records) == 1 and records[0]["doc_id"] == "doc-0" and records[0]["status"] == 400
    assert "price" in records[0]["reason"] and records[0]["document"]["price"] == "not a number"
    assert stats["zhdedup/es/indexed"] == 1 and "zhdedup/es/retries" not in stats  # a 400 is not retried
    es_client.indices.refresh(index=index)
    assert [h["_source"]["url"] for h in es_client.search(index=index)["hits"]["hits"]] == ["doc-1"]


async def test_a_bulk_sent_in_two_parts_through_an_outage_loses_nothing(
        proxy: tuple[EsProxy, str], index: str, tmp_path: Path, es_client: Elasticsearch,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Both requests of a split batch meet a dead node, then one item is rejected for good: the rest is
    stored once, the rejected one is dead-lettered, nothing is lost."""
    monkeypatch.setattr("es_plugin.backend.batchwriter.MIN_BULK_PART", 1)  # a batch of two or more goes in two requests
    digests = [content_hash(TextCleaner().clean(text=t)) for t in TEXTS]
    assert len(bulk_parts([Action("create", d) for d in digests])) == 2
    install(es_client, index, BandLayout.from_config(DEDUP), {"price": {"type": "integer"}})
    p, url = proxy
    stats = Stats()
    b = backend(url, index, tmp_path, stats=stats, es_timeout=0.5, es_max_retries=10)
    loop = asyncio.get_running_loop()
    try:
        parts = bulk_parts

        def cut_first(actions: list[Action]) -> list[list[Action]]:  # the node dies as the batch is sent
            if not cutting:
                return parts(actions)
            cutting.pop()
            p.cut()
            loop.call_later(0.5, p.restore)
            return parts(actions)

        cutting = [True]
        monkeypatch.setattr("es_plugin.backend.batchwriter.bulk_parts", cut_first)
        fingerprinter = Fingerprinter(DEDUP)
        verdicts = await b.judge_many([  # one lookup batch, written as one bulk batch
            Entry(fingerprinter.prepare(f"doc-{i}", text=text),
                  {"url": f"doc-{i}", "price": "not a number" if i == 2 else i}, None) for i, text in enumerate(TEXTS)])
        assert [v.status for v in verdicts if not isinstance(v, Exception)] == ["unique"] * len(TEXTS)
    finally:
        p.restore()
        await b.close()
    records = dead_letters(tmp_path)
    assert [(r["doc_id"], r["status"]) for r in records] == [("doc-2", 400)]
    assert stats["zhdedup/es/retries"] >= 2 and stats["zhdedup/es/indexed"] == len(TEXTS) - 1
    es_client.indices.refresh(index=index)
    hits = es_client.search(index=index, size=100)["hits"]["hits"]
    assert sorted(h["_source"]["url"] for h in hits) == [f"doc-{i}" for i in range(len(TEXTS)) if i != 2]


async def test_layout_mismatch_at_start(index: str, es_url: str, tmp_path: Path, es_client: Elasticsearch) -> None:
    install(es_client, index, BandLayout(k=4))
    b = backend(es_url, index, tmp_path)
    with pytest.raises(Exception, match="ZHDEDUP_THRESHOLD=4"):
        await judge(b, 0)
    await b.close()


def test_non_asyncio_reactor_is_refused() -> None:
    code = textwrap.dedent("""
        from twisted.internet import epollreactor
        epollreactor.install()
        from scrapy_zhdedup.config import DedupConfig, EsConfig
        from es_plugin.backend.elasticsearch_backend import ElasticsearchBackend
        from scrapy_zhdedup.errors import ZhDedupError
        try:
            ElasticsearchBackend(DedupConfig(), EsConfig())
        except ZhDedupError as exc:
            print(exc)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True).stdout
    assert 'TWISTED_REACTOR = "twisted.internet.asyncioreactor.AsyncioSelectorReactor"' in out


def test_a_lookup_that_misses_a_shard_is_asked_again_not_taken_as_complete(es_client: Elasticsearch,
                                                                          index: str) -> None:
    """A shard that cannot answer (an index just created by another writer, a node gone) answers its
    documents of an ``mget`` with an error: the lookup is retried, then fails (the item is dead-lettered,
    never judged on half an answer); once the shard is there, it finds the repeat.  Here the key
    registry's one shard is on no node."""
    fingerprinter = Fingerprinter(DEDUP)
    features = fingerprinter.features(fingerprinter.clean(text=TEXTS[0] * 4))
    store(es_client, index, [("original", features)])
    registry = registry_name(index)
    es_client.indices.delete(index=registry)
    es_client.indices.create(index=registry, settings={"number_of_shards": 1, "number_of_replicas": 0,
                                                       "index.routing.allocation.require._name": "no-such-node"},
                             mappings={"enabled": False}, wait_for_active_shards="0")  # it never has one
    stats = Stats()
    lookups = EsLookups(index, CandidateKeys.from_config(DEDUP), NearRule.from_config(DEDUP),
                        RetryPolicy(2, backoff_base=0.01), EsStats(stats))
    with pytest.raises(LookupItemError, match=r"no_shard_available|unavailable_shards"):
        drive(es_client, lookups.near([features]))
    assert stats["zhdedup/es/retries"] == 2
    es_client.indices.put_settings(index=registry, settings={"index.routing.allocation.require._name": None})
    es_client.cluster.health(index=registry, wait_for_status="green", timeout="60s")
    drive(es_client, lookups.registry.claim([Claimant("original", "original", features)], judge=False))
    [found] = drive(es_client, lookups.near([features]))
    assert found is not None and found.doc_id == "original"
