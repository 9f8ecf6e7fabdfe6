"""The Elasticsearch backend on real Chinese news text, against the real node."""

from __future__ import annotations

import asyncio
import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from elasticsearch import Elasticsearch

from corpora.reposts import combo
from es_plugin.backend.groupcommit import Entry
from es_plugin.backend.judging import Turns
from es_plugin.backend.lookups import EsLookups
from es_plugin.index.chinese import SearchText, segment
from es_plugin.index.document import repeat_id
from scrapy_zhdedup.config import DedupConfig
from scrapy_zhdedup.deduper import Deduper
from scrapy_zhdedup.text.clean import TextCleaner, content_hash
from tests.support.backend_texts import exact_repost, judge, near_repost
from tests.support.es_proxy import EsProxy
from tests.support.helpers import Stats, backend

pytestmark = pytest.mark.es

DEDUP = DedupConfig()


async def test_verdicts_equal_the_embedded_engine(es_url: str, index: str, tmp_path: Path,
                                                  es_client: Elasticsearch, texts: list[str]) -> None:
    """A stream of originals, edited and exact reposts: same verdicts as in-process, across many flushes."""
    rng = random.Random(7)
    stream = [(f"o{i}", t) for i, t in enumerate(texts[:40])]
    for i, t in enumerate(texts[:20]):
        stream.append((f"n{i}", near_repost(t)))
        stream.append((f"e{i}", exact_repost(t)))
    rng.shuffle(stream)
    embedded = Deduper(DEDUP)
    expected = [(v.status, v.dup_of, v.distance) for v in (embedded.judge(i, text=t) for i, t in stream)]
    stats = Stats()
    b = backend(es_url, index, tmp_path, stats=stats, es_bulk_size=7, es_flush_interval=0.3)
    try:
        got = []
        for doc_id, text in stream:
            got.append(await judge(b, doc_id, text))
            await asyncio.sleep(0.01)  # let flushes land in between, so both lookup paths are used
    finally:
        await b.close()
    assert got == expected
    assert {s for s, _, _ in got} == {"unique", "near", "exact"}
    assert stats["zhdedup/es/indexed"] == len(stream) and "zhdedup/dead_letter" not in stats
    es_client.indices.refresh(index=index)
    assert es_client.count(index=index)["count"] == len(stream)


async def test_reposts_beyond_the_simhash_bands_get_the_same_verdicts_as_embedded(
        es_url: str, index: str, tmp_path: Path, es_client: Elasticsearch, texts: list[str]) -> None:
    """Issue 10: combined edits (scattered characters, another header and footer, a cut tail,
    traditional script, look-alike templates) move the SimHash far beyond k; the sketch keys (keyword
    field ``zhdedup.mh``) and the stored sketch find and decide them on Elasticsearch as in the
    embedded store, also when some of the originals were flushed and some still buffered."""
    stream = [(f"o{i}", t) for i, t in enumerate(texts[:30])]
    for i, t in enumerate(texts[:30]):
        rng = random.Random(f"sketch:{i}")
        stream.append((f"c{i}", combo(t, rng)))
    random.Random(5).shuffle(stream)
    embedded = Deduper(DEDUP)
    expected = [(v.status, v.dup_of, v.distance, v.similarity)
                for v in (embedded.judge(i, text=t) for i, t in stream)]
    beyond = [e for e in expected if e[0] == "near" and e[2] is not None and e[2] > DEDUP.threshold]
    assert len(beyond) >= 10, "the combined edits must reach past the SimHash bands"
    b = backend(es_url, index, tmp_path, es_bulk_size=5, es_flush_interval=0.2)
    try:
        got = []
        for doc_id, text in stream:
            v = await b.judge(doc_id, text=text, html=None, document={"url": doc_id})
            got.append((v.status, v.dup_of, v.distance, v.similarity))
            await asyncio.sleep(0.01)
    finally:
        await b.close()
    assert got == expected


async def test_batched_verdicts_equal_one_at_a_time(es_url: str, index: str, tmp_path: Path,
                                                    es_client: Elasticsearch, texts: list[str]) -> None:
    """Issue 11: one mget + one _msearch for a batch, whose near and exact repeats of each other and of
    stored documents are judged as if one at a time in input order."""
    rng = random.Random(11)
    stored = [(f"o{i}", t) for i, t in enumerate(texts[:20])]  # flushed: found by Elasticsearch
    batch = [(f"p{i}", t) for i, t in enumerate(texts[20:40])]  # new: their repeats are in the same batch
    batch += [(f"n{i}", near_repost(t)) for i, t in enumerate(texts[10:40])]
    batch += [(f"e{i}", exact_repost(t)) for i, t in enumerate(texts[15:35])]
    rng.shuffle(batch)
    embedded = Deduper(DEDUP)
    expected = [(v.status, v.dup_of, v.distance) for v in (embedded.judge(i, text=t) for i, t in stored + batch)]
    assert sum(s == "near" for s, d, _ in expected[len(stored):] if d and d.startswith("p")) >= 5

    async def run(name: str, batches: list[list[tuple[str, str]]]) -> tuple[list[Any], Stats]:
        stats = Stats()
        b = backend(es_url, name, tmp_path, stats=stats)
        prep = b._fingerprinter.prepare
        try:
            await b.judge_many([Entry(prep(i, text=t), {"url": i}, None) for i, t in stored])
            await b.flush()
            lookups_before = stats["zhdedup/es/lookups"]
            got = []
            for part in batches:
                got += await b.judge_many([Entry(prep(i, text=t), {"url": i}, None) for i, t in part])
            stats["batch_lookups"] = stats["zhdedup/es/lookups"] - lookups_before
        finally:
            await b.close()
        return [(v.status, v.dup_of, v.distance) for v in got], stats

    one_by_one, single = await run(f"{index}-single", [[item] for item in batch])
    together, batched = await run(index, [batch])
    assert together == one_by_one == expected[len(stored):]
    assert batched["batch_lookups"] <= 3 < len(batch) <= single["batch_lookups"]  # mget, _msearch, maybe a 2nd
    es_client.options(ignore_status=404).indices.delete(index=f"{index}-single")


async def test_drop_mode_segments_only_what_it_stores(es_url: str, index: str, tmp_path: Path, texts: list[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Segmenting a text for search costs about as much as its fingerprint: an exact repeat that drop
    mode does not store is not segmented (it was, on the event loop, before it was dropped)."""
    segmented: list[str] = []
    words = SearchText.words
    monkeypatch.setattr(SearchText, "words", lambda self, clean: segmented.append(clean) or words(self, clean))
    b = backend(es_url, index, tmp_path, annotate=False)
    try:
        assert (await judge(b, "o", texts[0]))[0] == "unique"
        await b.flush()
        assert (await judge(b, "e", exact_repost(texts[0])))[0] == "exact"
    finally:
        await b.close()
    assert len(segmented) == 1


async def test_a_dropped_near_repeat_seen_again_is_searched_beside_its_exact_lookup(
        es_url: str, index: str, tmp_path: Path, texts: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Drop mode stores no near repeat, so the exact lookup cannot find one seen again: its near search goes
    in the same round as that lookup, not in a second round after it (a round trip per batch on a crawl
    that meets the same repost twice).  An exact repeat, which the lookup finds, is not searched near."""
    searched: list[int] = []
    again: list[int] = []  # a second round, after the exact lookup
    both, near = EsLookups.both, EsLookups.near
    monkeypatch.setattr(EsLookups, "both", lambda self, digests, features: searched.append(len(features)) or both(
        self, digests, features))
    monkeypatch.setattr(EsLookups, "near", lambda self, features: again.append(len(features)) or near(self, features))
    b = backend(es_url, index, tmp_path, annotate=False)
    try:
        assert (await judge(b, "o", texts[0]))[0] == "unique"
        await b.flush()
        assert (await judge(b, "n1", near_repost(texts[0])))[0] == "near"
        assert (await judge(b, "e1", exact_repost(texts[0])))[0] == "exact"
        searched.clear()
        assert (await judge(b, "n2", near_repost(texts[0])))[:2] == ("near", "o")
        assert (await judge(b, "e2", exact_repost(texts[0])))[0] == "exact"
    finally:
        await b.close()
    assert searched == [1, 0] and not any(again)


async def test_pipeline_items_arriving_together_are_looked_up_together(
        es_url: str, index: str, tmp_path: Path, texts: list[str]) -> None:
    stats = Stats()
    b = backend(es_url, index, tmp_path, stats=stats, es_batch_window=0.2)
    items = [(f"o{i}", t) for i, t in enumerate(texts[:10])] + [(f"n{i}", near_repost(t)) for i, t in enumerate(texts[:10])]
    try:
        verdicts = await asyncio.gather(*(judge(b, doc_id, text) for doc_id, text in items))
    finally:
        await b.close()
    assert verdicts[10:] == [("near", f"o{i}", verdicts[10 + i][2]) for i in range(10)]
    # one at a time would be two requests per item; how many share a batch depends on how fast the
    # items are prepared against the lookups' round trips, so only "some did" is asserted
    assert stats["zhdedup/es/lookups"] < 2 * len(items)


async def test_overlapping_lookup_batches_decide_in_arrival_order(es_url: str, index: str, tmp_path: Path,
                                                                 texts: list[str]) -> None:
    """Items arriving every few ms with a short window: several lookup batches are in flight at once,
    and a jittery connection lets a later batch's answers overtake an earlier one's.  The verdicts are
    still those of judging one at a time in arrival order (the embedded engine's), with flushes between."""
    rng = random.Random(11)
    stream = [(f"o{i}", t) for i, t in enumerate(texts[:30])]
    stream += [(f"n{i}", near_repost(t)) for i, t in enumerate(texts[:30])]
    stream += [(f"e{i}", exact_repost(t)) for i, t in enumerate(texts[:10])]
    rng.shuffle(stream)
    embedded = Deduper(DEDUP)
    expected = [(v.status, v.dup_of, v.distance) for v in (embedded.judge(i, text=t) for i, t in stream)]
    proxy = EsProxy(es_url)
    url = await proxy.start()
    b = backend(url, index, tmp_path, es_batch_window=0.005, es_bulk_size=9, es_flush_interval=0.1)
    try:
        await b.open()
        proxy.jitter(0.03, seed=5)
        tasks = []
        for doc_id, text in stream:
            tasks.append(asyncio.create_task(judge(b, doc_id, text)))
            await asyncio.sleep(rng.uniform(0, 0.01))
        got = await asyncio.gather(*tasks)
    finally:
        await b.close()
        await proxy.close()
    assert got == expected


async def test_a_batch_that_decided_nothing_hands_the_turn_on_after_the_one_before() -> None:
    """A batch whose lookups failed (or that was cancelled) decides nothing, but the batch after it must
    still wait for every earlier batch still in flight, not just for it."""
    turns = Turns()
    in_flight, failed, last = turns.take(), turns.take(), turns.take()
    turns.done(failed)
    waiting = asyncio.ensure_future(turns.wait(last))
    await asyncio.sleep(0)
    assert not waiting.done()
    turns.done(in_flight)
    await asyncio.sleep(0)
    assert waiting.done()
    await turns.wait(last)  # its turn: no wait


@pytest.mark.parametrize("bulk_size", [1000, 3])
async def test_concurrent_near_duplicates(es_url: str, index: str, tmp_path: Path, es_client: Elasticsearch,
                                          texts: list[str], bulk_size: int) -> None:
    """All items in flight at once: one bulk size larger than them all (1000), or flushes racing lookups (3)."""
    originals = texts[:20]
    items = [(f"o{i}", t) for i, t in enumerate(originals)]
    items += [(f"n{i}", near_repost(t)) for i, t in enumerate(originals)]
    random.Random(3).shuffle(items)
    b = backend(es_url, index, tmp_path, es_bulk_size=bulk_size, es_flush_interval=0.05 if bulk_size < 10 else 3600)
    try:
        verdicts = await asyncio.gather(*(judge(b, doc_id, text) for doc_id, text in items))  # all concurrent
        es_client.indices.refresh(index=index)
        assert es_client.count(index=index)["count"] == len(items)  # written before their verdicts were returned
        by_id = dict(zip((doc_id for doc_id, _ in items), verdicts))
        for i in range(len(originals)):
            pair = sorted([by_id[f"o{i}"][0], by_id[f"n{i}"][0]])
            assert pair == ["near", "unique"], (i, by_id[f"o{i}"], by_id[f"n{i}"])
        assert await judge(b, "x0", exact_repost(originals[0])) == ("exact", "o0", 0)
    finally:
        await b.close()
    es_client.indices.refresh(index=index)
    assert es_client.count(index=index)["count"] == 2 * len(originals) + 1


async def test_two_writers_see_each_other(es_url: str, index: str, tmp_path: Path,
                                          es_client: Elasticsearch, texts: list[str]) -> None:
    s1, s2 = Stats(), Stats()
    w1 = backend(es_url, index, tmp_path, stats=s1)
    w2 = backend(es_url, index, tmp_path, stats=s2)
    try:
        for i, t in enumerate(texts[:10]):
            assert (await judge(w1, f"w1-{i}", t))[0] == "unique"
        # no flush: written before their verdicts were returned, so visible to the other writer
        for i, t in enumerate(texts[:10]):
            assert await judge(w2, f"w2-exact-{i}", exact_repost(t)) == ("exact", f"w1-{i}", 0)
            status, dup_of, _ = await judge(w2, f"w2-near-{i}", near_repost(t))
            assert (status, dup_of) == ("near", f"w1-{i}")
        # both judge one new text at once: neither sees the other's at its lookup, the 409 makes the second a repeat
        race = texts[10]
        verdicts = dict(zip(("race-1", "race-2"), await asyncio.gather(judge(w1, "race-1", race),
                                                                      judge(w2, "race-2", race))))
    finally:
        await w1.close()
        await w2.close()
    [winner] = [doc_id for doc_id, v in verdicts.items() if v[0] == "unique"]
    [other] = {"race-1", "race-2"} - {winner}
    assert verdicts[other] == ("exact", winner, 0)
    assert s1.get("zhdedup/es/conflicts", 0) + s2.get("zhdedup/es/conflicts", 0) <= 1  # met at the lookup, or the 409
    digest = content_hash(TextCleaner().clean(text=race))
    first = es_client.get(index=index, id=digest)["_source"]["zhdedup"]
    assert (first["doc_id"], first["status"]) == (winner, "unique")
    loser = es_client.get(index=index, id=repeat_id(digest, other))["_source"]
    assert (loser["zhdedup"]["status"], loser["zhdedup"]["dup_of"], loser["url"]) == ("exact", winner, other)


@pytest.mark.parametrize("annotate", [False, True])
async def test_drop_and_annotate(es_url: str, index: str, tmp_path: Path, es_client: Elasticsearch,
                                 texts: list[str], annotate: bool) -> None:
    b = backend(es_url, index, tmp_path, annotate=annotate)
    try:
        verdicts = [await judge(b, "a", texts[0]), await judge(b, "a-near", near_repost(texts[0])),
                    await judge(b, "a-exact", exact_repost(texts[0])), await judge(b, "b", texts[1])]
    finally:
        await b.close()
    assert [v[0] for v in verdicts] == ["unique", "near", "exact", "unique"]
    es_client.indices.refresh(index=index)
    docs = {h["_source"]["url"]: h for h in es_client.search(index=index, size=10)["hits"]["hits"]}
    if not annotate:
        assert set(docs) == {"a", "b"}  # duplicates are not written
        return
    assert set(docs) == {"a", "a-near", "a-exact", "b"}
    near, exact = docs["a-near"]["_source"]["zhdedup"], docs["a-exact"]["_source"]["zhdedup"]
    assert (near["status"], near["dup_of"], near["cluster"]) == ("near", "a", "a")
    assert near["distance"] >= 0 and near["similarity"] >= DEDUP.similarity
    assert (exact["status"], exact["dup_of"], exact["cluster"], exact["distance"]) == ("exact", "a", "a", 0)
    assert "fp" not in exact and "b0" not in exact  # exact repeats stay out of the band fields
    assert docs["a-exact"]["_id"] == repeat_id(docs["a"]["_id"], "a-exact")
    assert docs["a"]["_id"] == docs["a"]["_source"]["zhdedup"]["hash"]
    assert docs["a"]["_source"]["title"] == texts[0][:20]


async def test_item_fields(es_url: str, index: str, tmp_path: Path, es_client: Elasticsearch) -> None:
    b = backend(es_url, index, tmp_path)
    page = "<html><head><meta charset='gbk'></head><body><p>北京今日发布暴雨红色预警信号。</p></body></html>"
    page = page.encode("gbk")
    try:
        with pytest.raises(ValueError, match="'zhdedup'"):
            await b.judge("z", text="正文内容", html=None, document={"zhdedup": 1})
        with pytest.raises(ValueError, match="cannot be stored"):
            await b.judge("o", text="正文内容", html=None, document={"obj": object()})
        verdict = await b.judge("h", text=None, html=page, document={"url": "h", "html": page})
    finally:
        await b.close()
    stored = es_client.get(index=index, id=verdict.content_hash)["_source"]
    assert "暴雨红色预警" in stored["html"]  # a page body is stored as text, decoded like the page


SPIDER = """
import json, sys
import scrapy
from scrapy.crawler import CrawlerProcess

TEXTS = json.loads(sys.argv[3])

class News(scrapy.Spider):
    name = "news"
    start_urls = ["data:,start"]

    def parse(self, response):
        for i, text in enumerate(TEXTS):
            body = "".join(f"<p>{p}</p>" for p in text.split("\\n"))
            page = f"<html><body><div class='article'>{body}</div></body></html>"
            yield {"url": f"https://example.com/{i}", "html": page, "dedup_status": None, "dup_of": None,
                   "dup_distance": None, "cluster_id": None}

process = CrawlerProcess({
    "TWISTED_REACTOR": "twisted.internet.asyncioreactor.AsyncioSelectorReactor",
    "ITEM_PIPELINES": {"scrapy_zhdedup.pipelines.ZhDedupPipeline": 300},
    "ZHDEDUP_BACKEND": "elasticsearch", "ZHDEDUP_MODE": "annotate",
    "ZHDEDUP_ES_URL": sys.argv[1], "ZHDEDUP_ES_INDEX": sys.argv[2], "ZHDEDUP_ES_DEAD_LETTER": sys.argv[4],
    "FEEDS": {sys.argv[5]: {"format": "jsonlines"}}, "LOG_LEVEL": "WARNING",
    "ZHDEDUP_WORKERS": int(sys.argv[6]), "CONCURRENT_ITEMS": int(sys.argv[7]),
})
process.crawl(News)
process.start()
"""


@pytest.mark.parametrize("workers, concurrent_items", [(1, 1), (2, 16)])
def test_scrapy_crawl_with_the_elasticsearch_backend(es_url: str, index: str, tmp_path: Path, es_client: Elasticsearch,
                                                     texts: list[str], workers: int, concurrent_items: int) -> None:
    """The pipeline end to end in a real crawl (own process: it installs the asyncio reactor).  With
    worker processes, items still reach the lookups in arrival order, however many are in flight."""
    out = tmp_path / "items.jsonl"
    stream = [texts[0], near_repost(texts[0]), exact_repost(texts[0]), texts[1]]
    subprocess.run([sys.executable, "-c", SPIDER, es_url, index, json.dumps(stream), str(tmp_path / "dead.jsonl"),
                    str(out), str(workers), str(concurrent_items)], check=True, timeout=120)
    items = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [(i["url"][-1], i["dedup_status"], i["dup_of"]) for i in sorted(items, key=lambda i: i["url"])] == [
        ("0", "unique", None), ("1", "near", "https://example.com/0"), ("2", "exact", "https://example.com/0"),
        ("3", "unique", None)]
    es_client.indices.refresh(index=index)
    assert es_client.count(index=index)["count"] == 4
    for hit in es_client.search(index=index, size=4)["hits"]["hits"]:  # the cleaned text, never the page
        stored = hit["_source"]
        assert "html" not in stored and stored["text"] and "<p>" not in stored["text"]
        assert stored["zhdedup"]["words"].split()[:3] == segment(stored["text"]).split()[:3]


async def test_a_document_judged_again_gets_its_stored_verdict(es_url: str, index: str, tmp_path: Path,
                                                               es_client: Elasticsearch, texts: list[str]) -> None:
    """A recrawl (a new backend, same index) of the same ids and texts says what the first crawl said:
    never "exact duplicate of itself". Stored documents are recognised by their own first copy, an exact
    repeat in annotate mode by its own copy (stored under another _id), so both backends count the same
    reruns (issue 33, item 5)."""
    stream = [("a", texts[0]), ("b", texts[1]), ("a-near", near_repost(texts[0])), ("a-copy", exact_repost(texts[0]))]
    runs = []
    for _ in range(2):
        b = backend(es_url, index, tmp_path, annotate=True)
        try:
            runs.append([await b.judge(i, text=t, html=None, document={"url": i}) for i, t in stream])
        finally:
            await b.close()
    before, after = runs
    assert [v.record() for v in after] == [v.record() for v in before]
    assert [v.status for v in before] == ["unique", "unique", "near", "exact"]
    assert [v.rerun for v in after] == ["same", "same", "same", "same"]
    es_client.indices.refresh(index=index)
    assert es_client.count(index=index)["count"] == len(stream)  # nothing stored twice


@pytest.mark.parametrize(("settings", "quiet"), [
    ({}, True),  # Scrapy's default LOG_LEVEL is DEBUG: a default project must not get two lines per item
    ({"LOG_LEVEL": "INFO"}, True),
    ({"LOG_LEVEL": "DEBUG"}, False),  # asked for by the project (or -L DEBUG)
])
def test_the_clients_lines_are_quiet_unless_debug_was_asked_for(settings: dict[str, str], quiet: bool) -> None:
    """Issue 33, item 6: 64 elastic_transport INFO lines for 28 items in a default project."""
    import logging

    from scrapy.settings import Settings

    from es_plugin.backend.elasticsearch_backend import quiet_transport

    transport = logging.getLogger("elastic_transport")
    saved = transport.level
    try:
        transport.setLevel(logging.NOTSET)
        quiet_transport(Settings(settings, priority="project"))
        assert transport.getEffectiveLevel() == logging.ERROR if quiet else transport.level == logging.NOTSET
        transport.setLevel(logging.INFO)  # a level set by the user is theirs
        quiet_transport(Settings({}, priority="project"))
        assert transport.level == logging.INFO
    finally:
        transport.setLevel(saved)
