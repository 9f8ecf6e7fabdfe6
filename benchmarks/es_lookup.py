"""Lookup cost of the Elasticsearch backend on a populated index (default band layout; others on request).

An index is filled with ``--docs`` documents shaped as the backend writes them (``Stored.to_source``:
SimHash band keys, the MinHash sketch and its 16 keys; passages off, the default) and its key registry
(:class:`KeyOwners`: the key documents ``registry.fill`` would write, by bulk), then queried with
real reposts:

* ``--queries`` real articles (``corpora.corpus.load_base``) with their full features
  (``Fingerprinter.features``);
* synthetic documents, each a random mixture of 8-15 sentences (split on 。！？) drawn from every base
  article, cleaned as the engine cleans: their sketches and sketch keys are computed from that text,
  so keys collide as often as sentences are shared (random sketches would never collide, which
  flatters the lookup).  Their SimHash fingerprints are drawn bit by bit with the per-bit
  frequencies of the real ones (the bias of real SimHash bits is what makes band keys collide;
  segmenting a million texts is not needed to get there);
* the queries are edited reposts of the real articles (the ``corpora.reposts`` transforms);
* measured: candidates per lookup (hits on the first page, how many of them via the sketch keys,
  how many pass :class:`~scrapy_zhdedup.similarity.rule.NearRule`, and all matching documents), latency of the
  raw lookup (realtime ``mget`` by hash, then the key registry's two ``mget``, as ``EsLookups`` sends them),
  latency of a whole ``judge`` through :class:`ElasticsearchBackend` (cleaning and features
  included), items/s with concurrent judgements, and bytes on disk per document after a force merge.

Run on demand (not a test)::

    python -m benchmarks es_lookup --url "$(bash scripts/es-node.sh url)" [--docs 1000000] [--queries 1000]
        [--natural-segments] [--passes 3]

``--natural-segments`` keeps the segments loading made (a ``-live`` index) instead of force-merging to
one, which flatters the lookups of a live index.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
from elasticsearch import AsyncElasticsearch, Elasticsearch

from benchmarks import common
from benchmarks.runner import Benchmark, Result
from corpora.corpus import load_base
from corpora.reposts import TRANSFORMS, sentences
from es_plugin.backend.elasticsearch_backend import ElasticsearchBackend
from es_plugin.backend.lookups import EsLookups
from es_plugin.backend.registry import FILL_PAGE, OWNERS, _stamp_at, key_ids
from es_plugin.backend.retry import RetryPolicy
from es_plugin.backend.stats import EsStats
from es_plugin.index.document import Stored, query_features
from es_plugin.index.template import install, registry_name, template_name
from es_plugin.operations import adrive
from scrapy_zhdedup.config import DedupConfig, EsConfig
from scrapy_zhdedup.index.bands import BandLayout
from scrapy_zhdedup.index.nearindex import MAX_POSTINGS, CandidateKeys
from scrapy_zhdedup.model import Features, Verdict
from scrapy_zhdedup.similarity.fingerprinter import Fingerprinter
from scrapy_zhdedup.similarity.rule import NearRule
from scrapy_zhdedup.similarity.sketch import band_keys, sketch
from scrapy_zhdedup.text.clean import content_hash

CHUNK = 5000  # documents per bulk request while loading
KEY_CHUNK = 20_000  # key documents per bulk request while loading the registry
MAX_JUDGED = 10_000  # documents a run's judgements can write (a page of search hits: no delete_by_query on the test node)
SENTENCES = (8, 15)  # sentences per synthetic document


@dataclass
class Real:
    doc_id: str
    text: str
    digest: str
    features: Features


def percentile(values: Sequence[float], q: float) -> float:
    return float(np.percentile(np.array(values), q)) if values else float("nan")


def real_articles(n: int, fingerprinter: Fingerprinter) -> list[Real]:
    out = []
    for article in load_base(limit=n):
        clean = fingerprinter.clean(text=article.text)
        out.append(Real(article.id, article.text, content_hash(clean), fingerprinter.features(clean)))
    return out


def sentence_pool(fingerprinter: Fingerprinter) -> list[str]:
    """The sentences of every base article, cleaned as the engine cleans."""
    return [s for article in load_base() for s in sentences(fingerprinter.clean(text=article.text))]


def reposts(articles: list[Real]) -> list[tuple[str, str]]:
    """One edited repost per article, cycling through every transform."""
    names = sorted(TRANSFORMS)
    out = []
    for i, a in enumerate(articles):
        name = names[i % len(names)]
        out.append((f"q-{a.doc_id}-{name}", TRANSFORMS[name](a.text, random.Random(f"bench:{a.doc_id}"))))
    return out


def synthetic_fps(real: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` fingerprints whose bits are independent with the real per-bit frequencies."""
    weights = np.uint64(1) << np.arange(64, dtype=np.uint64)
    p = ((real[:, None] >> np.arange(64, dtype=np.uint64)) & np.uint64(1)).mean(axis=0)
    out = np.empty(n, dtype=np.uint64)
    for start in range(0, n, 100_000):
        bits = rng.random((min(100_000, n - start), 64)) < p
        out[start : start + len(bits)] = (bits.astype(np.uint64) * weights).sum(axis=1, dtype=np.uint64)
    return out


def synthetic_documents(pool: list[str], fps: np.ndarray, max_chars: int,
                        seed: int) -> Iterator[tuple[str, str, Features]]:
    """``(doc_id, content hash, features)`` of sentence mixtures, one per fingerprint in ``fps``."""
    rng = random.Random(seed)
    for i, fp in enumerate(fps.tolist()):
        text = "".join(rng.choices(pool, k=rng.randint(*SENTENCES)))
        summary = sketch(text[:max_chars])
        yield f"syn-{i}", content_hash(text), Features(fp, [], summary, band_keys(summary))


def bulk_body(index: str, layout: BandLayout, docs: list[tuple[str, str, Features]], seen_at: datetime) -> str:
    """Bulk ``create`` body of first copies, each with a url and the ``zhdedup`` fields the backend writes."""
    lines = []
    for doc_id, digest, features in docs:
        verdict = Verdict(doc_id, "unique", None, None, doc_id, digest, features.fingerprint)
        lines.append(json.dumps({"create": {"_index": index, "_id": digest}}))
        lines.append(json.dumps({"url": doc_id, **Stored.of(verdict, seen_at, features=features).to_source(layout)}))
    return "\n".join(lines) + "\n"


class KeyOwners:
    """The key registry of loaded originals, exactly as ``registry.fill`` writes it for them, without its
    read-modify-write per key (an hour at 1M documents here; bulk ``create`` of the result takes minutes).

    ``fill`` reads the originals by content hash, ascending, in pages of ``FILL_PAGE``, and appends each
    page's claimants of a key (in that order, stamped from ``seen_at``) unless the key already held more
    than ``MAX_POSTINGS`` owners before that page: so do :meth:`documents`."""

    def __init__(self, keys: CandidateKeys) -> None:
        self.keys = keys
        self.ids: dict[str, int] = {}  # key _id -> its number, so a million documents' keys fit in memory
        self.digests: list[str] = []
        self.held: list[np.ndarray] = []  # each document's key numbers

    def add(self, digest: str, features: Features) -> None:
        self.digests.append(digest)
        self.held.append(np.array([self.ids.setdefault(k, len(self.ids)) for k in key_ids(self.keys, features)],
                                  dtype=np.int32))

    def documents(self, stamp: str) -> Iterator[tuple[str, dict[str, Any]]]:
        """``(_id, _source)`` of every key document ``fill`` would leave."""
        owners: list[list[int]] = [[] for _ in self.ids]
        page_of = np.full(len(self.ids), -1, dtype=np.int64)
        before = np.zeros(len(self.ids), dtype=np.int64)  # owners when the page that last touched it began
        for rank, doc in enumerate(sorted(range(len(self.digests)), key=self.digests.__getitem__)):
            page = rank // FILL_PAGE
            for key in self.held[doc].tolist():
                if page_of[key] != page:
                    page_of[key], before[key] = page, len(owners[key])
                if before[key] <= MAX_POSTINGS:
                    owners[key].append(doc)
        for key, number in self.ids.items():
            yield key, {OWNERS: [[self.digests[doc], stamp] for doc in owners[number]]}


def load(client: Elasticsearch, index: str, layout: BandLayout, n_synthetic: int, real: list[Real],
         pool: list[str], max_chars: int, seed: int, merge: bool) -> float:
    """Create the index and bulk-load it, and its key registry (:class:`KeyOwners`: what ``registry.fill``
    writes, by bulk ``create``); returns seconds taken (force merges included when ``merge``)."""
    started = time.perf_counter()
    registry = KeyOwners(CandidateKeys(layout))
    install(client, index, layout)
    client.indices.put_settings(index=index, settings={"index": {"refresh_interval": "-1", "number_of_replicas": 0}})
    fps = synthetic_fps(np.array([r.features.fingerprint for r in real], dtype=np.uint64), n_synthetic,
                        np.random.default_rng(seed))
    seen_at = datetime.now(timezone.utc)

    def send(body: str) -> None:
        response = client.bulk(body=body)  # type: ignore[arg-type]  # NDJSON text, sent as it is
        if response["errors"]:
            bad = next(next(iter(i.values())) for i in response["items"] if next(iter(i.values()))["status"] >= 300)
            raise RuntimeError(f"bulk load rejected a document: {bad}")

    with ThreadPoolExecutor(2) as pool_:
        jobs = [pool_.submit(send, bulk_body(index, layout, [(r.doc_id, r.digest, r.features) for r in real], seen_at))]
        for r in real:
            registry.add(r.digest, r.features)
        batch: list[tuple[str, str, Features]] = []
        for n, doc in enumerate(synthetic_documents(pool, fps, max_chars, seed), 1):
            registry.add(doc[1], doc[2])
            batch.append(doc)
            if len(batch) == CHUNK or n == n_synthetic:
                jobs.append(pool_.submit(send, bulk_body(index, layout, batch, seen_at)))
                batch = []
                if len(jobs) > 4:
                    jobs.pop(0).result()
                if n % 100_000 < CHUNK:
                    print(f"# loaded {n:,} synthetic documents in {time.perf_counter() - started:.0f} s", file=sys.stderr)
        for job in jobs:
            job.result()
        print(f"# loaded the documents in {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
        stamp = _stamp_at(seen_at.isoformat(timespec="milliseconds"))  # Stored.of's seen_at, as fill reads it
        keys, lines = registry_name(index), []
        for n, (key, source) in enumerate(registry.documents(stamp), 1):
            lines += [json.dumps({"create": {"_index": keys, "_id": key}}), json.dumps(source)]
            if n % KEY_CHUNK == 0:
                jobs.append(pool_.submit(send, "\n".join(lines) + "\n"))
                lines = []
                if len(jobs) > 4:
                    jobs.pop(0).result()
        if lines:
            jobs.append(pool_.submit(send, "\n".join(lines) + "\n"))
        for job in jobs:
            job.result()
    print(f"# loaded {len(registry.ids):,} key documents by {time.perf_counter() - started:.0f} s", file=sys.stderr,
          flush=True)
    client.indices.put_settings(index=index, settings={"index": {"refresh_interval": None}})
    client.indices.refresh(index=[index, registry_name(index)])
    if merge:
        client.options(request_timeout=3600).indices.forcemerge(index=[index, registry_name(index)], max_num_segments=1)
    return time.perf_counter() - started


def forget_judged(client: Elasticsearch, index: str, merge: bool) -> None:
    """Delete what an earlier run's judgements wrote (the unique reposts), so a reused index is the loaded one."""
    judged = {"bool": {"should": [{"prefix": {"zhdedup.doc_id": "q-"}}, {"term": {"zhdedup.doc_id": "warm-up"}}]}}
    client.indices.refresh(index=index)
    found = client.search(index=index, query=judged, size=MAX_JUDGED, source=False)["hits"]["hits"]
    if found:
        client.bulk(operations=[{"delete": {"_index": index, "_id": hit["_id"]}} for hit in found], refresh=True)
    if merge:
        client.options(request_timeout=3600).indices.forcemerge(index=index, max_num_segments=1)


async def raw_lookups(url: str, index: str, dedup: DedupConfig, queries: list[tuple[str, str, Features]]) -> dict[str, Any]:
    """The backend's lookups per document (realtime ``mget`` by hash, then the key registry's two
    ``mget``, as ``EsLookups`` sends them), timed one document at a time; the candidates the keys named
    (all of them: the registry has no pages), and how many the rule accepts."""
    client = AsyncElasticsearch(url, request_timeout=60)
    lookups = EsLookups(index, CandidateKeys.from_config(dedup), NearRule.from_config(dedup), RetryPolicy(), EsStats())
    registry, rule = lookups.registry, NearRule.from_config(dedup)
    latencies: list[float] = []
    named_n, passed, found = [], [], 0
    try:
        for source_id, digest, features in queries:
            query = query_features(features)
            started = time.perf_counter()
            await adrive(client, lookups.exact([digest]))
            states = await adrive(client, registry.read(key_ids(registry.keys, query)))
            named = registry.candidates(query, states)
            stored = await adrive(client, registry.originals(named))
            latencies.append(1000 * (time.perf_counter() - started))
            named_n.append(len(named))
            hits = [stored[h] for h in named if h in stored]
            accepted = [] if not hits else [hits[a.position].doc_id for a in rule.accept(
                query, np.stack([h.sketch.values for h in hits]),
                np.array([h.sketch.shingles for h in hits]), [h.fp for h in hits])]
            passed.append(len(accepted))
            found += source_id in accepted
    finally:
        await client.close()
    return {"lookup_p50": percentile(latencies, 50), "lookup_p95": percentile(latencies, 95),
            "lookup_p99": percentile(latencies, 99), "hits_mean": float(np.mean(named_n)),
            "hits_p99": percentile(named_n, 99), "hits_max": max(named_n), "via_sketch_mean": float(np.mean(named_n)),
            "passed_mean": float(np.mean(passed)), "passed_max": max(passed),
            "matching_mean": float(np.mean(named_n)), "matching_p99": percentile(named_n, 99),
            "matching_max": max(named_n), "source_found": found / len(queries)}


async def through_backend(url: str, index: str, dedup: DedupConfig, items: list[tuple[str, str]],
                          concurrency: int, dead_letter: Path, workers: int = 1, passes: int = 3) -> dict[str, Any]:
    """Judge ``items`` one at a time (latency), then ``passes`` times with ``concurrency`` in flight
    (throughput), preparing them on ``workers`` processes as the Scrapy pipeline does with ``ZHDEDUP_WORKERS``.

    The first concurrent pass runs code paths neither the node's JIT nor the client has run in bulk
    yet (batches of 16, not of 1); a crawl lives in what comes after, so ``items_s`` is the median of
    the later passes and every pass is kept (``items_s_passes``).  Drop mode: near repeats are not
    written, so every pass sees the same index.
    """
    es = EsConfig(es_url=url, es_index=index, es_dead_letter=str(dead_letter))
    backend = ElasticsearchBackend(dedup, es, workers=workers)
    latencies, statuses = [], []
    rates = []
    try:
        await backend.judge("warm-up", text=items[0][1], html=None, document={"url": "warm-up"})
        for doc_id, text in items:
            started = time.perf_counter()
            verdict = await backend.judge(doc_id, text=text, html=None, document={"url": doc_id})
            latencies.append(1000 * (time.perf_counter() - started))
            statuses.append(verdict.status)

        async def worker(queue: list[tuple[str, str]], suffix: str) -> None:
            while queue:
                doc_id, text = queue.pop()
                await backend.judge(doc_id + suffix, text=text, html=None, document={"url": doc_id})

        for again in range(1, passes + 1):
            queue = list(items)
            started = time.perf_counter()
            await asyncio.gather(*(worker(queue, f"-again{again}") for _ in range(concurrency)))
            rates.append(len(items) / (time.perf_counter() - started))
    finally:
        await backend.close()
    steady = rates[1:] or rates
    return {"judge_p50": percentile(latencies, 50), "judge_p99": percentile(latencies, 99),
            "items_s": statistics.median(steady), "items_s_passes": [round(r) for r in rates],
            "near": statuses.count("near") / len(statuses), "exact": statuses.count("exact") / len(statuses)}


def cpu_per_item(fingerprinter: Fingerprinter, items: list[tuple[str, str]]) -> float:
    """Milliseconds of cleaning and features per item (what a judgement costs before Elasticsearch)."""
    started = time.perf_counter()
    for _, text in items:
        fingerprinter.features(fingerprinter.clean(text=text))
    return 1000 * (time.perf_counter() - started) / len(items)


def run(args: argparse.Namespace) -> Result:
    client = Elasticsearch(args.url, request_timeout=600)
    fingerprinter = Fingerprinter(DedupConfig(threshold=args.threshold))
    t0 = time.perf_counter()
    real = real_articles(args.queries, fingerprinter)
    pool = sentence_pool(fingerprinter)
    items = reposts(real)
    cpu_ms = cpu_per_item(fingerprinter, items)
    print(f"# {len(real)} real articles, their reposts and {len(pool):,} pool sentences ready in "
          f"{time.perf_counter() - t0:.0f} s; clean+features CPU {cpu_ms:.2f} ms/item", file=sys.stderr)
    queries = []
    for (_, text), source in zip(items, real):
        clean = fingerprinter.clean(text=text)
        queries.append((source.doc_id, content_hash(clean), fingerprinter.features(clean)))

    live, merge = ("-live", False) if args.natural_segments else ("", True)
    rows = []
    for spec in args.blocks.split(","):
        blocks = args.threshold + int(spec.strip().removeprefix("k+"))
        dedup = DedupConfig(threshold=args.threshold, bands=blocks, simhash_bands=args.simhash_bands)
        layout = BandLayout.from_config(dedup)
        index = f"bench-lookup-{args.docs}-b{blocks}{live}"
        seconds: float | None = None
        if args.reuse and client.indices.exists(index=index):
            forget_judged(client, index, merge)
        else:
            client.options(ignore_status=404).indices.delete(index=index)
            seconds = load(client, index, layout, args.docs - len(real), real, pool, dedup.max_chars, seed=blocks,
                           merge=merge)
        stats = client.indices.stats(index=index, metric=["store", "docs"])["indices"][index]["primaries"]
        segments = len(client.cat.segments(index=index, format="json"))
        row: dict[str, Any] = {"docs": stats["docs"]["count"], "blocks": blocks, "tables": len(layout.tables),
                               "simhash_bands": args.simhash_bands, "segments": segments,
                               "load_s": seconds, "bytes_doc": stats["store"]["size_in_bytes"] / stats["docs"]["count"],
                               "load_avg_after_load": [round(x, 2) for x in os.getloadavg()]}
        common.wait_until_quiet(client)  # merges left by loading or by the last run are not this run's cost
        row.update(asyncio.run(raw_lookups(args.url, index, dedup, queries)))
        row.update(asyncio.run(through_backend(args.url, index, dedup, items, args.concurrency,
                                               Path(f"/tmp/{index}-dead-letter.jsonl"), args.workers,
                                               args.passes)))
        row["load_avg_end"] = [round(x, 2) for x in os.getloadavg()]
        rows.append(row)
        print(f"# {row}", file=sys.stderr)
        if not (args.keep or args.reuse):
            client.indices.delete(index=index)
            client.options(ignore_status=404).indices.delete_index_template(name=template_name(index))

    header = ("docs", "blocks", "segments", "hits mean", "hits p99", "via sketch mean", "pass rule mean", "matching mean",
              "matching p99", "source found", "lookup p50 ms", "p95 ms", "p99 ms", "judge p50 ms", "judge p99 ms",
              f"items/s (c={args.concurrency}, {args.workers} w)", "per pass", "near", "bytes/doc", "load s")
    tables = [common.table(header, [
        (r["docs"], r["blocks"], r["segments"], r["hits_mean"], r["hits_p99"], r["via_sketch_mean"], r["passed_mean"],
         r["matching_mean"], r["matching_p99"], f"{r['source_found']:.1%}", r["lookup_p50"], r["lookup_p95"],
         r["lookup_p99"], r["judge_p50"], r["judge_p99"], r["items_s"],
         " / ".join(map(str, r["items_s_passes"])), f"{r['near']:.1%}", r["bytes_doc"],
         r["load_s"]) for r in rows])]
    for row in rows:
        row["clean_features_ms_per_item"] = cpu_ms
    return Result(rows, tables)


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--docs", type=int, default=100_000, help="documents in each index (default %(default)s)")
    parser.add_argument("--queries", type=int, default=1000, help="real articles loaded and queried by repost")
    parser.add_argument("--threshold", type=int, default=3)
    parser.add_argument("--blocks", default="k+2", help="layouts to compare, e.g. k+1,k+2 (default %(default)s)")
    parser.add_argument("--simhash-bands", action="store_true",
                        help="search the SimHash band keys too (ZHDEDUP_SIMHASH_BANDS; off by default)")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--workers", type=int, default=1,
                        help="processes preparing the items judged through the backend (ZHDEDUP_WORKERS; default 1)")
    parser.add_argument("--passes", type=int, default=3,
                        help="concurrent passes over the reposts; items/s is the median of all but the first")
    parser.add_argument("--natural-segments", action="store_true",
                        help="leave the index in the segments loading made instead of force-merging it to one "
                             "(a live index: each near search seeks its keys in every segment)")
    parser.add_argument("--keep", action="store_true", help="keep the indices afterwards")
    parser.add_argument("--reuse", action="store_true",
                        help="query indices kept by an earlier --keep run instead of loading them again (implies --keep)")


BENCHMARKS = (Benchmark("es_lookup", __doc__, run, options, node="required"),)
