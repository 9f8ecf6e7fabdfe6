"""Lookup cost of the Elasticsearch backend on a populated index, per band layout.

For each layout (pigeonhole ``blocks = k+1`` and the default ``blocks = k+2``) an index is filled with
``--docs`` documents and then queried with real reposts:

* the documents are ``--queries`` real articles (``benchmarks.corpus.load_base``, with their passage
  keys) plus synthetic fingerprints drawn bit by bit with the per-bit frequencies of the real ones
  (so the bias of real SimHash bits, which is what makes band keys collide, is kept; segmenting a
  million texts is not needed to get there; synthetic documents have no passage keys);
* the queries are edited reposts of the real articles (the ``benchmarks.reposts`` transforms);
* measured: band candidates per lookup (documents sharing a band key), latency of the raw Elasticsearch
  lookup (realtime GET by hash + band search), latency of a whole ``judge`` through
  :class:`ElasticsearchBackend` (cleaning and fingerprint included), items/s with concurrent
  judgements, and bytes on disk per document after a force merge (``_stats/store``).

Run on demand (not a test)::

    python -m benchmarks.bench_es_lookup --url http://127.0.0.1:9250 [--docs 100000] [--queries 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
from elasticsearch import AsyncElasticsearch, Elasticsearch

from benchmarks.corpus import load_base
from benchmarks.reposts import TRANSFORMS
from es_plugin.backend import ElasticsearchBackend
from es_plugin.lookups import near_query
from es_plugin.template import install, template_name
from scrapy_zhdedup import __version__
from scrapy_zhdedup.bands import BandLayout
from scrapy_zhdedup.config import DedupConfig, EsConfig
from scrapy_zhdedup.engine import Fingerprinter
from scrapy_zhdedup.text import content_hash

CHUNK = 5000  # documents per bulk request while loading


@dataclass
class Real:
    doc_id: str
    text: str
    digest: str
    fp: int
    passages: list[int]


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.array(values), q)) if values else float("nan")


def real_articles(n: int, fingerprinter: Fingerprinter) -> list[Real]:
    out = []
    for article in load_base(limit=n):
        clean = fingerprinter.clean(text=article.text)
        out.append(Real(article.id, article.text, content_hash(clean), fingerprinter.fingerprint(clean),
                        fingerprinter.passages(clean)))
    return out


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


def ndjson_chunk(index: str, layout: BandLayout, ids: list[str], digests: list[str], fps: np.ndarray,
                 seen_at: str, passages: list[list[int]] | None = None) -> str:
    """Bulk body for documents shaped as the backend writes them (zhdedup fields plus a url)."""
    keys = layout.table_keys_array(fps) & np.uint64((1 << layout.key_bits) - 1)
    names = layout.field_names
    lines = []
    for i, (doc_id, digest, fp, row) in enumerate(zip(ids, digests, fps.tolist(), keys.tolist())):
        bands = ",".join(f'"{name}":"{key:x}"' for name, key in zip(names, row))
        if passages and passages[i]:
            bands += ',"passages":[' + ",".join(f'"{key:08x}"' for key in passages[i]) + "]"
        lines.append(f'{{"create":{{"_index":"{index}","_id":"{digest}"}}}}')
        lines.append(
            f'{{"url":"{doc_id}","zhdedup":{{"fp":"{fp:016x}",{bands},"hash":"{digest}","doc_id":"{doc_id}",'
            f'"status":"unique","cluster":"{doc_id}","seen_at":"{seen_at}","version":"{__version__}"}}}}'
        )
    return "\n".join(lines) + "\n"


def load(client: Elasticsearch, index: str, layout: BandLayout, n_synthetic: int, real: list[Real],
         seed: int) -> float:
    """Create the index and bulk-load it; returns seconds taken."""
    started = time.perf_counter()
    install(client, index, layout)
    client.indices.put_settings(index=index, settings={"index": {"refresh_interval": "-1", "number_of_replicas": 0}})
    rng = np.random.default_rng(seed)
    fps = synthetic_fps(np.array([r.fp for r in real], dtype=np.uint64), n_synthetic, rng)
    seen_at = datetime.now(timezone.utc).isoformat(timespec="milliseconds")

    def send(body: str) -> None:
        response = client.bulk(body=body)
        if response["errors"]:
            bad = next(next(iter(i.values())) for i in response["items"] if next(iter(i.values()))["status"] >= 300)
            raise RuntimeError(f"bulk load rejected a document: {bad}")

    with ThreadPoolExecutor(2) as pool:
        jobs = [pool.submit(send, ndjson_chunk(index, layout, [r.doc_id for r in real], [r.digest for r in real],
                                                np.array([r.fp for r in real], dtype=np.uint64), seen_at,
                                                [r.passages for r in real]))]
        for start in range(0, n_synthetic, CHUNK):
            count = min(CHUNK, n_synthetic - start)
            ids = [f"syn-{i}" for i in range(start, start + count)]
            digests = [os.urandom(16).hex() for _ in range(count)]
            body = ndjson_chunk(index, layout, ids, digests, fps[start : start + count], seen_at)
            jobs.append(pool.submit(send, body))
            if len(jobs) > 4:
                jobs.pop(0).result()
        for job in jobs:
            job.result()
    client.indices.put_settings(index=index, settings={"index": {"refresh_interval": None}})
    client.indices.refresh(index=index)
    client.options(request_timeout=3600).indices.forcemerge(index=index, max_num_segments=1)
    return time.perf_counter() - started


async def raw_lookups(url: str, index: str, dedup: DedupConfig,
                      queries: list[tuple[str, int, list[int]]]) -> dict[str, Any]:
    """Realtime GET by hash + band/passage search, as the backend does, timed one at a time; plus band candidates."""
    client = AsyncElasticsearch(url, request_timeout=60)
    latencies, candidates = [], []
    try:
        for digest, fp, passages in queries:
            query = near_query(dedup.layout, fp, passages, dedup.passage_share)
            started = time.perf_counter()
            await client.options(ignore_status=404).get(index=index, id=digest, source_includes=["zhdedup.doc_id"])
            await client.search(index=index, query=query, size=100, track_total_hits=False,
                                source_includes=["zhdedup.fp", "zhdedup.doc_id", "zhdedup.cluster", "zhdedup.seen_at"])
            latencies.append(1000 * (time.perf_counter() - started))
            count = await client.count(index=index, query=near_query(dedup.layout, fp))
            candidates.append(count["count"])
    finally:
        await client.close()
    return {"lookup_p50": percentile(latencies, 50), "lookup_p99": percentile(latencies, 99),
            "cand_mean": float(np.mean(candidates)), "cand_p50": percentile(candidates, 50),
            "cand_p99": percentile(candidates, 99), "cand_max": max(candidates)}


async def through_backend(url: str, index: str, dedup: DedupConfig, items: list[tuple[str, str]],
                          concurrency: int, dead_letter: Path) -> dict[str, Any]:
    """Judge ``items`` one at a time (latency), then again with ``concurrency`` in flight (throughput).

    Drop mode: near repeats are not written, so the second pass sees the same index.
    """
    es = EsConfig(es_url=url, es_index=index, es_dead_letter=str(dead_letter))
    backend = ElasticsearchBackend(dedup, es)
    latencies, statuses = [], []
    try:
        await backend.judge("warm-up", text=items[0][1], html=None, document={"url": "warm-up"})
        for doc_id, text in items:
            started = time.perf_counter()
            verdict = await backend.judge(doc_id, text=text, html=None, document={"url": doc_id})
            latencies.append(1000 * (time.perf_counter() - started))
            statuses.append(verdict.status)
        queue = list(items)
        started = time.perf_counter()

        async def worker() -> None:
            while queue:
                doc_id, text = queue.pop()
                await backend.judge(doc_id + "-again", text=text, html=None, document={"url": doc_id})

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        rate = len(items) / (time.perf_counter() - started)
    finally:
        await backend.close()
    return {"judge_p50": percentile(latencies, 50), "judge_p99": percentile(latencies, 99), "items_s": rate,
            "near": statuses.count("near") / len(statuses), "exact": statuses.count("exact") / len(statuses)}


def cpu_per_item(fingerprinter: Fingerprinter, items: list[tuple[str, str]]) -> float:
    started = time.perf_counter()
    for _, text in items:
        fingerprinter.fingerprint(fingerprinter.clean(text=text))
    return 1000 * (time.perf_counter() - started) / len(items)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=os.environ.get("ZHDEDUP_TEST_ES_URL", "http://127.0.0.1:9250"))
    parser.add_argument("--docs", type=int, default=100_000, help="documents in each index (default %(default)s)")
    parser.add_argument("--queries", type=int, default=1000, help="real articles loaded and queried by repost")
    parser.add_argument("--threshold", type=int, default=3)
    parser.add_argument("--blocks", default="k+1,k+2", help="layouts to compare (default %(default)s)")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--keep", action="store_true", help="keep the indices afterwards")
    args = parser.parse_args(argv)

    client = Elasticsearch(args.url, request_timeout=600)
    fingerprinter = Fingerprinter(DedupConfig(threshold=args.threshold))
    t0 = time.perf_counter()
    real = real_articles(args.queries, fingerprinter)
    items = reposts(real)
    print(f"# {len(real)} real articles and reposts ready in {time.perf_counter() - t0:.0f} s; "
          f"clean+fingerprint CPU {cpu_per_item(fingerprinter, items):.2f} ms/item", file=sys.stderr)
    queries = []
    for _, text in items:
        clean = fingerprinter.clean(text=text)
        queries.append((content_hash(clean), fingerprinter.fingerprint(clean), fingerprinter.passages(clean)))

    rows = []
    for spec in args.blocks.split(","):
        blocks = args.threshold + int(spec.strip().removeprefix("k+"))
        dedup = DedupConfig(threshold=args.threshold, bands=blocks)
        layout = dedup.layout
        index = f"bench-lookup-{args.docs}-b{blocks}"
        client.options(ignore_status=404).indices.delete(index=index)
        seconds = load(client, index, layout, args.docs - len(real), real, seed=blocks)
        stats = client.indices.stats(index=index, metric=["store", "docs"])["indices"][index]["primaries"]
        row = {"docs": stats["docs"]["count"], "blocks": blocks, "tables": len(layout.tables),
               "key_bits": layout.key_bits, "load_s": seconds,
               "bytes_doc": stats["store"]["size_in_bytes"] / stats["docs"]["count"]}
        row.update(asyncio.run(raw_lookups(args.url, index, dedup, queries)))
        row.update(asyncio.run(through_backend(args.url, index, dedup, items, args.concurrency,
                                               Path(f"/tmp/{index}-dead-letter.jsonl"))))
        rows.append(row)
        print(f"# {row}", file=sys.stderr)
        if not args.keep:
            client.indices.delete(index=index)
            client.options(ignore_status=404).indices.delete_index_template(name=template_name(index))

    header = ("docs", "blocks", "tables", "key bits", "cand mean", "cand p50", "cand p99", "cand max",
              "ES lookup p50 ms", "ES lookup p99 ms", "judge p50 ms", "judge p99 ms",
              f"items/s (c={args.concurrency})", "near found", "bytes/doc", "load s")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for r in rows:
        print(f"| {r['docs']} | {r['blocks']} | {r['tables']} | {r['key_bits']} | {r['cand_mean']:.2f} | "
              f"{r['cand_p50']:.0f} | {r['cand_p99']:.0f} | {r['cand_max']} | {r['lookup_p50']:.2f} | "
              f"{r['lookup_p99']:.2f} | {r['judge_p50']:.1f} | {r['judge_p99']:.1f} | {r['items_s']:.0f} | "
              f"{r['near']:.1%} | {r['bytes_doc']:.0f} | {r['load_s']:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
