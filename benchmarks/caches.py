"""Feature caches: hit rate and memory against their cap, to choose the default caps.

    python -m benchmarks caches [--docs 20000] [--caps 25000,50000,100000,200000,400000,1000000]

Two caches sit on the fingerprint path: the Featurizer's word → weight table (a miss costs an IDF
lookup and a few regex tests) and the SimHasher's word → MD5 bytes table (a miss costs an MD5; a
short text's character shingles are hashed without it).
Both are cleared when full.  The documents of the scan corpus (real news, 30 % reposts) are cleaned and
segmented once; the exact key streams both caches see are then replayed against each cap with the
same clear-when-full policy, so hit rates are exact, not sampled.  Bytes per entry come from
``tracemalloc`` around filling the real caches; the time a miss costs is measured on the real code.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import tracemalloc
from collections import Counter
from collections.abc import Iterable, Sequence
from itertools import islice
from typing import Any

from benchmarks import common
from benchmarks.runner import Benchmark, Result, positive
from corpora.corpus import DEFAULT_SEED, scan_file
from scrapy_zhdedup.config import DedupConfig
from scrapy_zhdedup.similarity.fingerprinter import Fingerprinter
from scrapy_zhdedup.similarity.simhash import SimHasher, _digest
from scrapy_zhdedup.similarity.words import Featurizer

CAPS = (25_000, 50_000, 100_000, 200_000, 400_000, 1_000_000, 2_000_000)


def hit_rate(stream: Iterable[Sequence[str]], cap: int) -> tuple[float, int]:
    """Replay per-document key lists against a clear-when-full cache of ``cap`` entries."""
    seen: set[str] = set()
    hits = total = peak = 0
    for keys in stream:
        for key in keys:
            total += 1
            if key in seen:
                hits += 1
            else:
                if len(seen) >= cap:
                    seen.clear()
                seen.add(key)
        peak = max(peak, len(seen))
    return hits / total if total else 0.0, peak


def streams(n_docs: int) -> tuple[list[list[str]], list[list[str]], int]:
    """Per document: the words the Featurizer looks up, and the features the SimHasher hashes."""
    import rjieba

    fp = Fingerprinter(DedupConfig(features="auto"))  # the caches of the word SimHash (issue 40: not the default)
    assert fp.featurizer is not None
    words: list[list[str]] = []
    features: list[list[str]] = []
    chars = 0
    with scan_file(n_docs, DEFAULT_SEED).open(encoding="utf-8") as fh:
        for line in islice(fh, n_docs):
            rec = json.loads(line)
            clean = fp.clean(text=rec.get("text"), html=rec.get("html"))
            if fp.featurizer.mode_for(clean) == "words":
                words.append(list(Counter(rjieba.cut(clean))))
                features.append(list(fp.featurizer.words(clean)))  # a short text's shingles are not cached
            else:
                chars += 1
    return words, features, chars


def bytes_per_entry(words: list[list[str]], features: list[list[str]]) -> tuple[float, float]:
    featurizer, hasher = Featurizer("words"), SimHasher()
    featurizer._learn("预热")  # load the IDF table outside the measurement
    featurizer._single.clear()
    featurizer._bases.clear()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for doc in words:
        for word in doc:
            if word not in featurizer._single:
                featurizer._learn(word)
    mid = tracemalloc.get_traced_memory()[0]
    for doc in features:
        hasher._cached_digests(doc)
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    # keys are shared with the key streams held here, as with the texts they came from in a crawl;
    # count a key's own str too, which a real cache keeps alive alone
    key_bytes = sum(sys.getsizeof(w) for w in featurizer._single) / max(1, len(featurizer._single))
    return ((mid - before) / max(1, len(featurizer._single)) + key_bytes,
            (after - mid) / max(1, len(hasher._cache)) + key_bytes)


def miss_costs(words: list[list[str]], features: list[list[str]]) -> tuple[float, float]:
    """Microseconds per miss: a word learned, a feature hashed (over a fresh cache)."""
    featurizer = Featurizer("words")
    featurizer._learn("预热")
    vocab = list(dict.fromkeys(w for doc in words for w in doc))[:200_000]
    t0 = time.perf_counter()
    for w in vocab:
        featurizer._learn(w)
    learn = (time.perf_counter() - t0) / len(vocab) * 1e6
    feats = list(dict.fromkeys(f for doc in features for f in doc))[:200_000]
    t0 = time.perf_counter()
    for f in feats:
        _digest(f)
    digest = (time.perf_counter() - t0) / len(feats) * 1e6
    return learn, digest


def run(args: argparse.Namespace) -> Result:
    caps = [int(c) for c in args.caps.split(",")]
    words, features, chars = streams(args.docs)
    word_bytes, feature_bytes = bytes_per_entry(words, features)
    learn_us, digest_us = miss_costs(words, features)
    rows, results = [], {}
    for cap in caps:
        w_rate, w_peak = hit_rate(words, cap)
        f_rate, f_peak = hit_rate(features, cap)
        results[cap] = {"featurizer_hit_rate": w_rate, "featurizer_entries": w_peak,
                        "simhasher_hit_rate": f_rate, "simhasher_entries": f_peak,
                        "memory_mib": (w_peak * word_bytes + f_peak * feature_bytes) / 2**20}
        rows.append([f"{cap:,}", f"{w_rate:.3f}", f"{w_peak:,}", f"{f_rate:.3f}", f"{f_peak:,}",
                     common.mib(w_peak * word_bytes + f_peak * feature_bytes)])
    per_doc_w = sum(map(len, words)) / max(1, len(words))
    per_doc_f = sum(map(len, features)) / max(1, len(features))
    table = common.table(["cap", "Featurizer hits", "entries", "SimHasher hits", "entries", "memory (both)"], rows)
    note = (f"\n{per_doc_w:.0f} words and {per_doc_f:.0f} features per document; {chars} documents in character mode; "
            f"a miss costs {learn_us:.1f} µs (word) / {digest_us:.1f} µs (MD5); "
            f"{word_bytes:.0f} / {feature_bytes:.0f} bytes per entry")
    data: dict[str, Any] = {"docs": args.docs, "caps": results, "words_per_doc": per_doc_w,
                            "features_per_doc": per_doc_f, "char_mode_docs": chars, "miss_us_word": learn_us,
                            "miss_us_feature": digest_us, "bytes_per_word_entry": word_bytes,
                            "bytes_per_feature_entry": feature_bytes}
    return Result(data, [table], [note])


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--docs", type=positive, default=20_000)
    parser.add_argument("--caps", default=",".join(map(str, CAPS)))


BENCHMARKS = (Benchmark("caches", __doc__, run, options),)
