"""Where a document's time goes in ``zhdedup scan --workers 1``: CPU µs per document of each step (issue 40).

    python -m benchmarks scan_parts [--corpus news|mixed|html] [--docs 3000] [--repeat 3]

The steps of the scan's path, each timed alone over the same documents (process CPU time, so a busy
shared machine inflates them less than wall time; best of ``--repeat``), every cache warm as on a long
run: reading the JSONL line, cleaning (extraction where there is a page, NFKC, OpenCC), the content
hash, the shingle hashes, the SimHash made from them (the default, ``features = "sketch"``), the sketch's
bins, its band keys, the whole features step, each one document at a time and in batches of the worker
pool's chunk (``workers.CHUNK``, 64 documents: how ``scan`` computes them since issue 40), and judging
against the embedded store (lookups and remembering, on features computed beforehand).  Then the word
SimHash's steps, which run only with ``--features auto`` or ``words`` (the default before issue 40): rjieba's
segmentation, the word weights and the SimHash of the weighted words.  Beside them, the rensa peer's whole
path per document (``rensa_scan.judge``: shingling in Python, ``RMinHash``, ``RMinHashLSH``) and its
shingling alone.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Sequence
from typing import Any

from benchmarks import common, rensa_scan
from benchmarks.runner import Benchmark, Result, positive
from benchmarks.throughput import CORPORA, corpus_file
from corpora.corpus import DEFAULT_SEED
from scrapy_zhdedup.config import DedupConfig
from scrapy_zhdedup.deduper import Deduper
from scrapy_zhdedup.errors import EmptyTextError
from scrapy_zhdedup.model import Prepared
from scrapy_zhdedup.similarity.fingerprinter import Fingerprinter
from scrapy_zhdedup.similarity.simhash import of_shingle_hashes, of_shingle_hashes_many
from scrapy_zhdedup.similarity.sketch import (
    band_keys,
    band_keys_many,
    shingle_hashes,
    shingle_hashes_many,
    sketch_of_hashes,
    sketches_of_hashes,
)
from scrapy_zhdedup.similarity.words import cut
from scrapy_zhdedup.text.clean import content_hash
from scrapy_zhdedup.text.furniture import without_furniture
from scrapy_zhdedup.workers import CHUNK


def _cpu_us(fn: Callable[[], Any], n: int, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return 1e6 * best / n


def run(args: argparse.Namespace) -> Result:
    path = corpus_file(args.corpus, args.docs, args.seed)
    with open(path, encoding="utf-8") as fh:
        lines = fh.readlines()
    records = [json.loads(line) for line in lines]
    config = DedupConfig()
    fp = Fingerprinter(config)
    prepared: list[Prepared] = []
    judgeable = []  # the records scan judges (the others are bad lines: no text left after cleaning)
    for r in records:
        try:
            prepared.append(fp.prepare(r["id"], text=r.get("text"), html=r.get("html")))  # as scan's workers do
        except EmptyTextError:
            continue
        judgeable.append(r)
    texts = [without_furniture(p.clean[: config.max_chars]) for p in prepared]
    for p in prepared:  # features once, so the caches are warm and judging is timed on its own
        p.featured(fp.features)
    hashes = [shingle_hashes(t) for t in texts]
    sketches = [sketch_of_hashes(h) for h in hashes]
    featurizer = Fingerprinter(DedupConfig(features="auto")).featurizer  # the word SimHash, on request
    assert featurizer is not None
    words = [featurizer.words(t) for t in texts]
    n, repeat = len(prepared), args.repeat
    chunks = [texts[i : i + CHUNK] for i in range(0, n, CHUNK)]
    cleans = [[p.clean for p in prepared[i : i + CHUNK]] for i in range(0, n, CHUNK)]
    batches = [shingle_hashes_many(chunk) for chunk in chunks]
    batch_values = [sketches_of_hashes(h, bounds)[0] for h, bounds in batches]

    def judged() -> None:
        deduper = Deduper(config)  # a fresh store in memory; the documents carry their features
        for p in prepared:
            deduper.judge_prepared(p)

    parts: dict[str, float] = {
        "read the JSONL line": _cpu_us(lambda: [json.loads(line) for line in lines], n, repeat),
        "clean (extract, NFKC, OpenCC)": _cpu_us(
            lambda: [fp.cleaner.cleaned(text=r.get("text"), html=r.get("html")) for r in judgeable], n, repeat),
        "content hash": _cpu_us(lambda: [content_hash(p.clean) for p in prepared], n, repeat),
        "shingle hashes": _cpu_us(lambda: [shingle_hashes(t) for t in texts], n, repeat),
        "SimHash of the shingle hashes": _cpu_us(lambda: [of_shingle_hashes(h) for h in hashes], n, repeat),
        "sketch bins (of the shingle hashes)": _cpu_us(lambda: [sketch_of_hashes(h) for h in hashes], n, repeat),
        "band keys": _cpu_us(lambda: [band_keys(s) for s in sketches], n, repeat),
        "features, whole step (default)": _cpu_us(lambda: [fp.features(p.clean) for p in prepared], n, repeat),
        f"{CHUNK} at a time: shingle hashes": _cpu_us(lambda: [shingle_hashes_many(chunk) for chunk in chunks], n,
                                                      repeat),
        f"{CHUNK} at a time: SimHash of the shingle hashes": _cpu_us(
            lambda: [of_shingle_hashes_many(h, bounds) for h, bounds in batches], n, repeat),
        f"{CHUNK} at a time: sketch bins": _cpu_us(lambda: [sketches_of_hashes(h, bounds) for h, bounds in batches],
                                                   n, repeat),
        f"{CHUNK} at a time: band keys": _cpu_us(lambda: [band_keys_many(v).tolist() for v in batch_values], n,
                                                 repeat),
        f"{CHUNK} at a time: features, whole step": _cpu_us(lambda: [fp.features_many(c) for c in cleans], n,
                                                            repeat),
        "judge on the embedded store": _cpu_us(judged, n, repeat),
        "--features auto: segmentation (rjieba)": _cpu_us(lambda: [cut.__wrapped__(t) for t in texts], n, repeat),
        "--features auto: word weights (incl. segmentation)": _cpu_us(lambda: [featurizer.words(t) for t in texts],
                                                                      n, repeat),
        "--features auto: SimHash of the weighted words": _cpu_us(lambda: [fp.hasher(w) for w in words], n, repeat),
        "rensa peer, whole path": _cpu_us(lambda: list(rensa_scan.judge((r["id"], r["text"]) for r in records)),
                                          len(records), repeat),
        "rensa peer, its shingling alone": _cpu_us(lambda: [_shingles(r["text"]) for r in records], len(records),
                                                   repeat),
    }
    rows = [[name, f"{us:,.0f}"] for name, us in parts.items()]
    results = {"corpus": args.corpus, "file": str(path), "docs": n, "us_per_doc": parts}
    return Result(results, [common.table(["step", "CPU µs per document"], rows)])


def _shingles(text: str) -> Sequence[str]:
    return list({text[i : i + rensa_scan.SHINGLE] for i in range(max(1, len(text) - rensa_scan.SHINGLE + 1))})


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--corpus", choices=CORPORA, default="news", help="as throughput's (default %(default)s)")
    parser.add_argument("--docs", type=positive, default=3000, help="documents of the mixed and html corpora")
    parser.add_argument("--repeat", type=positive, default=3, help="timings of each step, best counts")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)


BENCHMARKS = (Benchmark("scan_parts", __doc__, run, options),)
