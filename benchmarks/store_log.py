"""Persisting each verdict: our CRC-framed append-only log vs sqlite3 in WAL mode; loading a 1M store.

    python -m benchmarks store_log [--docs 100000] [--load-docs 1000000]

Appends: ``--docs`` records the size of a real one at the default settings (64-bit fingerprint,
16-byte hash, the 260-byte sketch, no passages, a 40-character URL), each handed to the OS before
the next (what a verdict needs
to survive ``kill -9``): one ``write(2)`` per record for the log (``fsync`` once a second);
one ``INSERT`` + ``COMMIT`` per record for sqlite3 (WAL, ``synchronous=NORMAL``: no ``fsync``
per commit either).  Then both are read back in full (the replay on open).

Load: a store of ``--load-docs`` documents with seeded random features (as ``store_peaks`` makes
them) is snapshotted, then opened; the Bloom filter is loaded from the snapshot, and, for
comparison, rebuilt from the stored hashes.
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks import common
from benchmarks.runner import Benchmark, Result, positive
from benchmarks.store_bytes import store_bytes
from scrapy_zhdedup.config import DedupConfig
from scrapy_zhdedup.index.bloom import ExactFilter
from scrapy_zhdedup.index.nearindex import CandidateKeys
from scrapy_zhdedup.memory.record import Record
from scrapy_zhdedup.model import SKETCH_BYTES, SKETCH_SIZE, Sketch
from scrapy_zhdedup.similarity.sketch import features_of
from scrapy_zhdedup.store.embedded import EmbeddedStore
from scrapy_zhdedup.store.log import LOG_FILE, LogWriter, read_log


def _records(n: int) -> list[Record]:
    rng = random.Random(1)
    return [Record(i, i, 0, -1, 0, 0, 0, 0, i, rng.getrandbits(63), rng.randbytes(16), [],
                      rng.randbytes(SKETCH_BYTES), f"https://news.example.com/a/{i:012d}.html")
            for i in range(n)]


def bench_log(records: list[Record], directory: Path) -> dict[str, float]:
    path = directory / LOG_FILE
    started = time.perf_counter()
    log = LogWriter(path, 0, fsync_interval=1.0)
    for record in records:
        log.append(record)
    log.close()
    appended = time.perf_counter() - started
    started = time.perf_counter()
    assert len(read_log(path).records) == len(records)
    return {"append_us": 1e6 * appended / len(records), "replay_s": time.perf_counter() - started,
            "bytes_per_record": path.stat().st_size / len(records)}


def bench_sqlite(records: list[Record], directory: Path) -> dict[str, float]:
    path = directory / "log.sqlite"
    started = time.perf_counter()
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("CREATE TABLE log (entry INTEGER PRIMARY KEY, record BLOB NOT NULL)")
    for record in records:
        db.execute("BEGIN")
        db.execute("INSERT INTO log VALUES (?, ?)", (record.entry, record.encode()))
        db.execute("COMMIT")
    db.close()
    appended = time.perf_counter() - started
    started = time.perf_counter()
    db = sqlite3.connect(path)
    assert sum(1 for (blob,) in db.execute("SELECT record FROM log ORDER BY entry") if Record.decode(blob)) == len(records)
    db.close()
    size = sum(p.stat().st_size for p in directory.glob("log.sqlite*"))
    return {"append_us": 1e6 * appended / len(records), "replay_s": time.perf_counter() - started,
            "bytes_per_record": size / len(records)}


def bench_load(n: int, directory: Path) -> dict[str, float]:
    keys = CandidateKeys.from_config(DedupConfig())
    store = EmbeddedStore.open(keys, directory)
    rng = np.random.default_rng(2)
    fps = rng.integers(0, 2**63, size=n, dtype=np.int64).tolist()
    values = rng.integers(0, 0xFFFF, (n, SKETCH_SIZE), dtype=np.uint16)
    shingles = rng.integers(100, 3000, n).tolist()
    raw = rng.bytes(16 * n)
    hashes = [raw[16 * i : 16 * i + 16].hex() for i in range(n)]
    started = time.perf_counter()
    for i in range(n):
        store.add(f"https://news.example.com/a/{i:012d}.html", hashes[i],
                  features_of(fps[i], [], Sketch(values[i].copy(), shingles[i])))
    built = time.perf_counter() - started
    started = time.perf_counter()
    store.close()
    snapshot = time.perf_counter() - started
    started = time.perf_counter()
    again = EmbeddedStore.open(keys, directory)
    opened = time.perf_counter() - started
    parts = store_bytes(again)
    started = time.perf_counter()
    bloom = ExactFilter()
    for h in hashes:
        bloom.add(h)
    rebuilt = time.perf_counter() - started
    again.close()
    return {"docs": n, "append_s": built, "snapshot_s": snapshot, "open_s": opened, "bloom_rebuild_s": rebuilt,
            "snapshot_mib": (directory / "index.npz").stat().st_size / 2**20,
            "bytes_per_doc": (sum(parts.values()) - parts["bloom"]) / n}


def run(args: argparse.Namespace) -> Result:
    records = _records(args.docs)
    results: dict[str, dict[str, float]] = {}
    for name, bench in (("framed log", bench_log), ("sqlite3 WAL", bench_sqlite)):
        with tempfile.TemporaryDirectory() as tmp:
            results[name] = bench(records, Path(tmp))
    appends = common.table(["persistence", "µs per append", "replay s", "bytes/record"],
                           [[name, r["append_us"], r["replay_s"], r["bytes_per_record"]] for name, r in results.items()])
    with tempfile.TemporaryDirectory() as tmp:
        load = bench_load(args.load_docs, Path(tmp))
    return Result({"append": results, "load": load}, [appends, common.table(list(load), [list(load.values())])])


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--docs", type=positive, default=100_000, help="records appended (default %(default)s)")
    parser.add_argument("--load-docs", type=positive, default=1_000_000, help="documents in the store loaded")


BENCHMARKS = (Benchmark("store_log", __doc__, run, options),)
