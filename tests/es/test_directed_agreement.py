"""Issue 31: one directed rule on every store.  The same stream of the cases that broke the undirected
rule (an article ending with a known disclaimer, a stock clause in different provisions, a chain of
edits, attribution lines) gets the same verdicts from the embedded store, the Elasticsearch backend in
drop mode, ``es ingest``, ``es replay``, ``es dedup-index`` and ``es reconcile``, on a real node."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from elasticsearch import Elasticsearch

from es_plugin.commands.dedup_index import dedup_index
from es_plugin.commands.ingest import ingest
from es_plugin.commands.reconcile import reconcile
from es_plugin.commands.replay import replay
from es_plugin.index.document import Stored
from es_plugin.index.template import install
from scrapy_zhdedup import DedupConfig, Deduper, Verdict
from scrapy_zhdedup.config import EsConfig
from scrapy_zhdedup.index.bands import BandLayout
from tests.support import zhtexts
from tests.support.helpers import backend, write_jsonl

pytestmark = pytest.mark.es

DEDUP = DedupConfig()
FIELDS = ("status", "dup_of", "reason", "similarity", "contained", "distance")
DISCLAIMER = ("特别声明：以上文章内容仅代表作者本人观点，不代表新浪看点观点或立场。"
              "如有关于作品内容、版权或其它问题请于作品发表后的30日内与新浪看点联系。")
CLAUSE = "违反本法规定，构成违反治安管理行为的，由公安机关依法给予治安管理处罚；构成犯罪的，依法追究刑事责任。"
PROVISIONS = ("国家建立健全大气污染防治的监督管理体制，"
              "县级以上人民政府生态环境主管部门对本行政区域的大气污染防治实施统一监督管理。",
              "任何单位和个人不得非法收集、使用、加工、传输他人个人信息，不得非法买卖、提供或者公开他人个人信息。")
QUOTES = ("读书使人充实，讨论使人机智，笔记使人准确。读史使人明智，读诗使人灵秀，数学使人周密。",
          "人生最大的幸福，莫过于连续不断的劳动，让每一天都过得有意义，也让每一个明天都值得期待。")


def stream() -> list[tuple[str, str]]:
    a = zhtexts.articles(5)
    once = zhtexts.edit_chars(a[2].text, 6, seed=1)
    return [
        ("article", a[0].text),
        ("notice", DISCLAIMER),
        ("quoting", f"{a[1].text[:400]}\n{DISCLAIMER}"),  # embeds the notice: new content
        ("cut", a[0].text[: len(a[0].text) * 6 // 10]),  # inside the article: a cut copy
        ("headline", f"重磅！{a[0].title}-网易号\n{a[0].text}"),
        ("clause", CLAUSE),
        ("provision-1", PROVISIONS[0] + CLAUSE),
        ("provision-2", PROVISIONS[1] + CLAUSE),
        ("edited", a[2].text), ("edited-once", once), ("edited-twice", zhtexts.edit_chars(once, 6, seed=2)),
        ("quote", f"{QUOTES[0]}\n——选自《培根随笔》"), ("other-quote", f"{QUOTES[1]}\n——选自《培根随笔》"),
        ("same-quote", f"{QUOTES[0]}\n来源：读者文摘"),
        ("article-again", a[0].text),
        ("short-after-long", f"{a[3].text}\n{DISCLAIMER}"), ("notice-after", DISCLAIMER + "\n"),
    ]


def row(v: Verdict | dict[str, Any]) -> tuple[Any, ...]:
    return tuple(getattr(v, f) if isinstance(v, Verdict) else v.get(f) for f in FIELDS)


@pytest.fixture(scope="module")
def expected() -> dict[str, tuple[Any, ...]]:
    deduper = Deduper(DEDUP)
    out = {doc_id: row(deduper.judge(doc_id, text=text)) for doc_id, text in stream()}
    statuses = {doc_id: r[0] for doc_id, r in out.items()}
    assert [statuses[d] for d in ("quoting", "provision-1", "provision-2", "other-quote", "short-after-long")] \
        == ["unique"] * 5
    assert {d: out[d][:3] for d in ("cut", "headline", "same-quote", "article-again")} == {
        "cut": ("near", "article", "contained"), "headline": ("near", "article", out["headline"][2]),
        "same-quote": ("near", "quote", "similar"), "article-again": ("exact", "article", "exact")}
    assert out["edited-twice"][1] in (None, "edited")
    return out


def stored(client: Elasticsearch, index: str) -> dict[str, tuple[Any, ...]]:
    client.indices.refresh(index=index)
    hits = client.search(index=index, size=100, query={"match_all": {}})["hits"]["hits"]
    return {h["_source"]["zhdedup"]["doc_id"]: row(h["_source"]["zhdedup"]) for h in hits}


def config(url: str, index: str, tmp_path: Path) -> EsConfig:
    return EsConfig(es_url=url, es_index=index, es_dead_letter=str(tmp_path / "dead.jsonl"))


def test_the_elasticsearch_backend_in_drop_mode(es_url: str, index: str, tmp_path: Path,
                                                expected: dict[str, tuple[Any, ...]]) -> None:
    """Drop mode stores originals only: they are all a near lookup ever compares with, in every store."""
    async def run() -> dict[str, tuple[Any, ...]]:
        b = backend(es_url, index, tmp_path, annotate=False, es_bulk_size=3, es_flush_interval=0.05)
        try:
            return {d: row(await b.judge(d, text=t, html=None, document={"url": d})) for d, t in stream()}
        finally:
            await b.close()

    assert asyncio.run(run()) == expected


def test_es_ingest_and_replay(es_url: str, es_client: Elasticsearch, index: str, tmp_path: Path,
                              expected: dict[str, tuple[Any, ...]]) -> None:
    source = write_jsonl(tmp_path / "in.jsonl", [{"id": d, "text": t} for d, t in stream()])
    ingest([source], DEDUP, config(es_url, index, tmp_path), checkpoint_dir=tmp_path / "ck")
    assert stored(es_client, index) == expected

    replayed = f"{index}-replayed"
    dead = tmp_path / "replay.jsonl"
    write_jsonl(dead, [{"index": replayed, "doc_id": d, "document": {"text": t}, "reason": "test", "at": "now"}
                       for d, t in stream()])
    replay(dead, DEDUP, config(es_url, replayed, tmp_path))
    assert stored(es_client, replayed) == expected


def test_es_dedup_index(es_client: Elasticsearch, index: str, tmp_path: Path,
                        expected: dict[str, tuple[Any, ...]]) -> None:
    es_client.indices.create(index=index, settings={"number_of_shards": 1, "number_of_replicas": 0},
                             mappings={"properties": {"text": {"type": "text"}}})
    ops: list[dict[str, Any]] = []
    for doc_id, text in stream():  # insertion order is read order on one shard
        ops += [{"index": {"_index": index, "_id": doc_id}}, {"text": text}]
    assert not es_client.bulk(operations=ops, refresh=True)["errors"]
    dedup_index(es_client, index, DEDUP, checkpoint=tmp_path / "ck.json", workers=1)
    assert stored(es_client, index) == expected


def test_es_reconcile_of_writers_that_saw_nothing(es_client: Elasticsearch, index: str,
                                                  expected: dict[str, tuple[Any, ...]]) -> None:
    """Every document stored as unique, as by writers that could not see each other: reconcile's
    self-join marks exactly the repeats the engine finds (an exact one as exact, like the engine)."""
    install(es_client, index, BandLayout.from_config(DEDUP))
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    fingerprinter = Deduper(DEDUP).fingerprinter
    ops: list[dict[str, Any]] = []
    for n, (doc_id, text) in enumerate(stream()):
        prepared = fingerprinter.prepare(doc_id, text=text)
        features = fingerprinter.features(prepared.clean)
        unique = Verdict(doc_id, "unique", None, None, doc_id, prepared.digest, features.fingerprint)
        source = Stored.of(unique, start + timedelta(seconds=n), features=features).to_source(BandLayout.from_config(DEDUP))
        ops += [{"create": {"_index": index, "_id": doc_id}}, source]
    assert not es_client.bulk(operations=ops, refresh=True)["errors"]
    reconcile(es_client, index, DEDUP)
    assert stored(es_client, index) == expected
