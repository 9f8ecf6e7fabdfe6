"""Lookup cost as the store grows: our band index vs ``simhash.SimhashIndex`` vs datasketch LSH.

    python -m benchmarks lookup [--sizes 10000,100000,1000000] [--queries 2000]

For each index and store size N, a fresh process (``common.in_child``) builds the index by inserting N
documents one by one, then times ``--queries`` lookups, each followed by an insert (what a
crawl does per page): half are near repeats of stored documents (1-3 bits flipped; for MinHash
~20 % of the values replaced), half are new.  Reported: µs per lookup+insert, candidates per
lookup (stored documents the index returns for a *new* document, all of which must be
verified), and memory per document (the worker's RSS growth while building, divided by N).

Data: the real corpus has ~7k distinct articles, so the N documents are synthetic: 64-bit
fingerprints and 128-value MinHashes drawn from a seeded generator (SimHash bits of distinct
texts are close to independent coin flips).  A "real" row at ``--real-docs`` (default 10k)
uses fingerprints and MinHashes of real documents from the scan file instead.
The slow baselines are capped (``--max-simhash``, ``--max-minhash``); sizes above the cap are
extrapolated linearly from the largest measured size and marked so.  The Bloom filter of
content hashes (``ExactFilter``) is measured the same way.  Ours on Elasticsearch:
``python -m benchmarks es_lookup``.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import time
from typing import Any

import numpy as np

from benchmarks import common
from benchmarks.runner import Benchmark, Result, positive
from corpora.corpus import scan_file

SEED = 20261121
NUM_PERM = 128
INDEXES = {
    "ours, 5 blocks / 10 tables (default, k+2)": ("ours", 5),
    "ours, 4 blocks / 4 tables (pigeonhole, k+1)": ("ours", 4),
    "simhash.SimhashIndex(k=3)": ("simhash", 0),
    "datasketch MinHashLSH(0.5, 128)": ("minhash", 0),
}
DEFAULT_SIZES = [10_000, 100_000, 1_000_000]
BLOOMS = {
    "Bloom ExactFilter (default: 100k initial, grows)": 100_000,
    "Bloom ExactFilter (initial capacity = N + queries)": 0,
}


# --- data -------------------------------------------------------------------------------


def synthetic_fps(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 2**64, size=n, dtype=np.uint64, endpoint=False)


def synthetic_minhashes(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 2**32 - 1, size=(n, NUM_PERM), dtype=np.uint32)


def real_data(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Fingerprints and 3-gram MinHashes of the first ``n`` scan-file documents (cached .npy)."""
    fp_path = common.CACHE_DIR / f"real-fps-{n}.npy"
    mh_path = common.CACHE_DIR / f"real-minhashes-{n}.npy"
    if not (fp_path.exists() and mh_path.exists()):
        from datasketch import MinHash

        from scrapy_zhdedup.config import DedupConfig
        from scrapy_zhdedup.similarity.fingerprinter import Fingerprinter

        print(f"fingerprinting {n:,} real documents for the 'real' rows (cached) ...", flush=True)
        fingerprinter = Fingerprinter(DedupConfig())
        fps, mhs = [], []
        with scan_file(n, SEED).open(encoding="utf-8") as lines:
            texts = [json.loads(line)["text"] for line in lines]
        for text in texts:
            clean = fingerprinter.clean(text=text)
            fps.append(fingerprinter.fingerprint(clean))
            m = MinHash(num_perm=NUM_PERM)
            m.update_batch([g.encode("utf-8") for g in {clean[i : i + 3] for i in range(max(1, len(clean) - 2))}])
            mhs.append(m.hashvalues)
        np.save(fp_path, np.array(fps, dtype=np.uint64))
        np.save(mh_path, np.array(mhs, dtype=np.uint32))
    return np.load(fp_path), np.load(mh_path)


def near_fp(fp: int, rng: np.random.Generator) -> int:
    for bit in rng.choice(64, size=int(rng.integers(1, 4)), replace=False):
        fp ^= 1 << int(bit)
    return fp


# --- workers: one index, one size, in a process of its own -----------------------------------


def _timed_queries(queries: list[Any], lookup_insert: Any) -> float:
    gc.collect()
    t0 = time.perf_counter()
    for i, q in enumerate(queries):
        lookup_insert(i, q)
    return time.perf_counter() - t0


def worker_ours(fps: np.ndarray, blocks: int, n_queries: int, seed: int) -> dict[str, Any]:
    from benchmarks.store_bytes import band_index_bytes
    from scrapy_zhdedup.index.bandindex import BandIndex
    from scrapy_zhdedup.index.bands import BandLayout
    from scrapy_zhdedup.similarity.simhash import hamming

    layout = BandLayout(k=3, blocks=blocks)
    rng = np.random.default_rng(seed + 1)
    fresh = [int(x) for x in synthetic_fps(n_queries // 2, seed + 2)]
    near = [near_fp(int(fps[i]), rng) for i in rng.integers(0, len(fps), n_queries - len(fresh))]
    values = [int(x) for x in fps]
    rss0 = common.rss_bytes()
    index = BandIndex(layout)
    t0 = time.perf_counter()
    for fp in values:
        index.add(fp)
    build = time.perf_counter() - t0
    index._table.compact()  # the state a saved and reloaded store is in
    gc.collect()
    mem = common.rss_bytes() - rss0
    nbytes = band_index_bytes(index)
    # Candidates a new document meets: rows sharing a table key with it, counted the way the
    # index would return them (each stored table key matching), computed outside the timing.
    keys = layout.table_keys_array(fps)
    sorted_keys = np.sort(keys.ravel())
    q_keys = layout.table_keys_array(np.array(fresh, dtype=np.uint64)).ravel()
    cands = (np.searchsorted(sorted_keys, q_keys, "right") - np.searchsorted(sorted_keys, q_keys, "left"))
    candidates = cands.reshape(len(fresh), -1).sum(axis=1).mean()
    del keys, sorted_keys
    queries = [fp for pair in zip(fresh, near) for fp in pair]
    found = 0

    def lookup_insert(_: int, fp: int) -> None:
        """Whether a candidate is within k bits (what the band index answers), then the insert."""
        nonlocal found
        found += min((hamming(index.fingerprint(row), fp) for row in set(index.candidates(fp))), default=64) <= 3
        index.add(fp)

    seconds = _timed_queries(queries, lookup_insert)
    return {"us_per_op": 1e6 * seconds / len(queries), "candidates": float(candidates), "rss_delta": mem,
            "nbytes": nbytes, "build_us_per_insert": 1e6 * build / len(fps), "near_found": found,
            "near_queries": len(near)}


def worker_simhash(fps: np.ndarray, n_queries: int, seed: int) -> dict[str, Any]:
    from simhash import Simhash, SimhashIndex

    rng = np.random.default_rng(seed + 1)
    fresh = [int(x) for x in synthetic_fps(n_queries // 2, seed + 2)]
    near = [near_fp(int(fps[i]), rng) for i in rng.integers(0, len(fps), n_queries - len(fresh))]
    values = [int(x) for x in fps]
    rss0 = common.rss_bytes()
    index = SimhashIndex([], k=3)
    t0 = time.perf_counter()
    for i, fp in enumerate(values):
        index.add(str(i), Simhash(fp))
    build = time.perf_counter() - t0
    gc.collect()
    mem = common.rss_bytes() - rss0
    # Its buckets are a defaultdict: reading a missing key would add it, so use .get.
    candidates = float(np.mean([sum(len(index.bucket.get(k, ())) for k in index.get_keys(Simhash(fp)))
                                for fp in fresh]))
    queries = [fp for pair in zip(fresh, near) for fp in pair]
    found = 0

    def lookup_insert(i: int, fp: int) -> None:
        nonlocal found
        s = Simhash(fp)
        found += bool(index.get_near_dups(s))
        index.add(f"q{i}", s)

    seconds = _timed_queries(queries, lookup_insert)
    return {"us_per_op": 1e6 * seconds / len(queries), "candidates": candidates, "rss_delta": mem,
            "nbytes": None, "build_us_per_insert": 1e6 * build / len(fps), "near_found": found,
            "near_queries": len(near)}


def worker_minhash(mhs: np.ndarray, n_queries: int, seed: int) -> dict[str, Any]:
    from datasketch import MinHash, MinHashLSH

    perms = MinHash(num_perm=NUM_PERM, seed=1).permutations

    def minhash(values: np.ndarray) -> MinHash:
        return MinHash(hashvalues=values, permutations=perms, scheme="affine32")

    rng = np.random.default_rng(seed + 1)
    fresh = list(synthetic_minhashes(n_queries // 2, seed + 2))
    near = []
    for i in rng.integers(0, len(mhs), n_queries - len(fresh)):
        values = mhs[i].copy()
        swap = rng.random(NUM_PERM) < 0.2
        values[swap] = rng.integers(0, 2**32 - 1, size=int(swap.sum()), dtype=np.uint32)
        near.append(values)
    rss0 = common.rss_bytes()
    lsh = MinHashLSH(threshold=0.5, num_perm=NUM_PERM)
    t0 = time.perf_counter()
    for i in range(len(mhs)):
        lsh.insert(i, minhash(mhs[i]))
    build = time.perf_counter() - t0
    gc.collect()
    mem = common.rss_bytes() - rss0
    candidates = float(np.mean([len(lsh.query(minhash(v))) for v in fresh]))
    queries = [v for pair in zip(fresh, near) for v in pair]
    found = 0

    def lookup_insert(i: int, values: np.ndarray) -> None:
        nonlocal found
        m = minhash(values)
        found += bool(lsh.query(m))
        lsh.insert(f"q{i}", m)

    seconds = _timed_queries(queries, lookup_insert)
    return {"us_per_op": 1e6 * seconds / len(queries), "candidates": candidates, "rss_delta": mem,
            "nbytes": None, "build_us_per_insert": 1e6 * build / len(mhs), "near_found": found,
            "near_queries": len(near)}


def worker_bloom(n: int, initial_capacity: int, n_queries: int) -> dict[str, Any]:
    from benchmarks.store_bytes import bloom_bytes
    from scrapy_zhdedup.index.bloom import ExactFilter

    def digest(i: int) -> str:
        return hashlib.blake2b(str(i).encode(), digest_size=16).hexdigest()

    hashes = [digest(i) for i in range(n)]
    queries = [digest(-i - 1) for i in range(n_queries)]
    rss0 = common.rss_bytes()
    bloom = ExactFilter(initial_capacity=initial_capacity or n + n_queries)
    t0 = time.perf_counter()
    for h in hashes:
        bloom.add(h)
    build = time.perf_counter() - t0
    gc.collect()
    mem = common.rss_bytes() - rss0
    nbytes = bloom_bytes(bloom)  # before the timed inserts, which may make a scalable filter grow
    false_positives = 0

    def lookup_insert(_: int, h: str) -> None:
        nonlocal false_positives
        false_positives += h in bloom
        bloom.add(h)

    seconds = _timed_queries(queries, lookup_insert)
    return {"us_per_op": 1e6 * seconds / len(queries), "candidates": None, "rss_delta": mem,
            "nbytes": nbytes, "build_us_per_insert": 1e6 * build / n,
            "false_positive_rate": false_positives / len(queries)}


def worker(kind: str, n: int, queries: int, blocks: int, data: str, bloom_capacity: int) -> dict[str, Any]:
    """One index at one size; run in a fresh process, so the RSS it grows by is its own."""
    if kind == "bloom":
        return worker_bloom(n, bloom_capacity, queries)
    if kind == "minhash":
        return worker_minhash(real_data(n)[1] if data == "real" else synthetic_minhashes(n, SEED), queries, SEED)
    fps = real_data(n)[0] if data == "real" else synthetic_fps(n, SEED)
    if kind == "ours":
        return worker_ours(fps, blocks, queries, SEED)
    return worker_simhash(fps, queries, SEED)


def spawn(kind: str, n: int, queries: int, *, blocks: int = 0, data: str = "synthetic",
          bloom_capacity: int = 0) -> dict[str, Any]:
    result: dict[str, Any] = common.in_child(worker, kind, n, queries, blocks, data, bloom_capacity)
    return result


# --- the benchmark ------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> Result:
    results: dict[str, Any] = {"indexes": {}, "bloom": {}}
    rows: list[list[Any]] = []
    plan: list[tuple[str, int, str]] = [(name, n, "synthetic") for n in args.sizes for name in INDEXES]
    if args.real_docs:
        real_data(args.real_docs)  # build the cache once, before the timed workers
        plan = [(name, args.real_docs, "real") for name in INDEXES] + plan
    measured: dict[tuple[str, str], list[tuple[int, dict[str, Any]]]] = {}
    for name, n, data in plan:
        kind, blocks = INDEXES[name]
        cap = {"simhash": args.max_simhash, "minhash": args.max_minhash}.get(kind)
        key = f"{name} @ {n} ({data})"
        if cap is not None and n > cap:
            prior = measured.get((name, data), [])
            if not prior:
                continue
            n0, r0 = prior[-1]
            est = r0["rss_delta"] / n0 * n
            results["indexes"][key] = {"extrapolated_from": n0, "rss_delta": est}
            rows.append([name, f"{n:,} ({data})", "not run", "-", "-", f"≈{est / n:.0f} (extrapolated)",
                         f"≈{common.mib(est)}", "-"])
            continue
        print(f"  {key} ...", flush=True)
        r = spawn(kind, n, args.queries, blocks=blocks, data=data)
        measured.setdefault((name, data), []).append((n, r))
        results["indexes"][key] = r
        rows.append([name, f"{n:,} ({data})", r["us_per_op"], r["candidates"],
                     r["nbytes"] / n if r["nbytes"] else None, r["rss_delta"] / n,
                     common.mib(r["rss_delta"]), f"{r['near_found']}/{r['near_queries']}"])
    index_table = common.table(
        ["index", "stored docs", "µs per lookup+insert", "candidates per new doc", "bytes/doc (arrays)",
         "bytes/doc (RSS growth)", "index RSS growth", "near repeats found"], rows)

    brows = []
    for name, capacity in BLOOMS.items():
        for n in args.sizes:
            print(f"  {name} @ {n} ...", flush=True)
            r = spawn("bloom", n, args.queries, bloom_capacity=capacity)
            results["bloom"][f"{name} @ {n}"] = r
            brows.append([name, f"{n:,}", r["us_per_op"], r["nbytes"] / n, common.mib(r["nbytes"]),
                          r["rss_delta"] / n, f"{100 * r['false_positive_rate']:.2f} %"])
    bloom_table = common.table(
        ["exact filter", "stored hashes", "µs per check+add", "bytes/doc (bit arrays)", "bit arrays",
         "bytes/doc (RSS)", "false positives"], brows)
    return Result(results, [index_table, bloom_table])


def _sizes(text: str) -> list[int]:
    sizes = [int(s.replace("_", "")) for s in text.split(",") if s.strip()]
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError("sizes must be positive integers, e.g. 10000,100000")
    return sorted(sizes)


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sizes", type=_sizes, default=DEFAULT_SIZES,
                        help="store sizes, comma separated (default %(default)s)")
    parser.add_argument("--queries", type=_queries, default=2000, help="timed lookup+insert operations per size")
    parser.add_argument("--real-docs", type=int, default=10_000, help="size of the real-data rows (0: none)")
    parser.add_argument("--max-simhash", type=int, default=1_000_000, help="largest size run for SimhashIndex")
    parser.add_argument("--max-minhash", type=int, default=100_000, help="largest size run for MinHashLSH")


def _queries(text: str) -> int:
    if positive(text) < 2:
        raise argparse.ArgumentTypeError("must be at least 2")
    return int(text)


BENCHMARKS = (Benchmark("lookup", __doc__, run, options),)
