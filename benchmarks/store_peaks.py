"""Where the embedded store's memory peaks while a scan fills it: each merge, each snapshot, the reload.

    python -m benchmarks store_peaks [--docs 1000000]

Adds ``--docs`` documents with seeded random features (a SimHash and a MinHash sketch per document,
so 10 band keys and 16 sketch keys each as for real text, but no text to segment: 1M documents take
minutes) to an :class:`~scrapy_zhdedup.store.embedded.EmbeddedStore` in a temporary directory, which logs and
snapshots itself as under ``zhdedup scan``; then closes it and opens it again.  Around every
``KeyTable.compact`` (per table), ``NearIndex.arrays``, ``EmbeddedStore.save`` and the reopening, the
kernel's peak-RSS counter is reset (``/proc/self/clear_refs``, Linux only), so each call's own peak is
exact, nested calls included.  The ``memory`` benchmark gives the real scan's figure; this one says which
step makes it.  Needs Linux (``/proc/self/clear_refs`` resets the peak-RSS counter).
"""

from __future__ import annotations

import argparse
import functools
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import common
from benchmarks.runner import Benchmark, Result, positive
from benchmarks.store_bytes import store_bytes
from scrapy_zhdedup.config import DedupConfig
from scrapy_zhdedup.deduper import Deduper
from scrapy_zhdedup.index import multimap, nearindex
from scrapy_zhdedup.model import SKETCH_SIZE, Sketch
from scrapy_zhdedup.similarity.sketch import features_of
from scrapy_zhdedup.store import embedded

DEFAULT_DOCS = 1_000_000
BATCH = 10_000
SEED = 1


def _status(key: str) -> int:
    """``VmRSS`` or ``VmHWM`` of this process, in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{key}:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {key} in /proc/self/status")


@dataclass
class Call:
    """The worst call of one kind: its peak above the RSS it started from."""

    calls: int = 0
    over: int = 0
    rss_in: int = 0
    peak: int = 0
    docs: int = 0


class Peaks:
    """Each wrapped call's peak RSS, from the kernel's high-water mark reset around it."""

    def __init__(self) -> None:
        self.open: list[list[int]] = []  # [rss at entry, peak] of the calls under way
        self.worst: dict[str, Call] = {}
        self.docs = 0
        self.overall = 0

    def _collect(self) -> None:
        """Fold the high-water mark since the last reset into every open call, then reset it."""
        hwm = _status("VmHWM")
        self.overall = max(self.overall, hwm)
        for frame in self.open:
            frame[1] = max(frame[1], hwm)
        Path("/proc/self/clear_refs").write_text("5")

    def measure(self, name: str, fn: Callable[[], Any]) -> Any:
        self._collect()
        rss = _status("VmRSS")
        frame = [rss, rss]
        self.open.append(frame)
        try:
            return fn()
        finally:
            self._collect()
            self.open.pop()
            worst = self.worst.setdefault(name, Call())
            worst.calls += 1
            if frame[1] - frame[0] >= worst.over:
                worst.over, worst.rss_in, worst.peak, worst.docs = frame[1] - frame[0], frame[0], frame[1], self.docs

    def wrap(self, owner: Any, attr: str, name: Callable[[Any], str]) -> None:
        """Measure every call of ``owner.attr`` (a method: ``name`` gets its instance)."""
        original = getattr(owner, attr)

        @functools.wraps(original)
        def measured(this: Any, *args: Any, **kwargs: Any) -> Any:
            return self.measure(name(this), lambda: original(this, *args, **kwargs))

        setattr(owner, attr, measured)


def fill(directory: Path, n_docs: int, peaks: Peaks) -> dict[str, Any]:
    """Add ``n_docs`` documents to a store in ``directory``, close it; RSS and nbytes before the close."""
    labels: dict[int, str] = {}
    peaks.wrap(multimap.KeyTable, "compact", lambda table: f"KeyTable.compact ({labels.get(id(table), '?')})")
    peaks.wrap(nearindex.NearIndex, "arrays", lambda _: "NearIndex.arrays (in save)")
    peaks.wrap(embedded.EmbeddedStore, "save", lambda _: "EmbeddedStore.save")
    deduper = Deduper.open(DedupConfig(), directory)
    s = deduper.store
    near = s._rows.near
    labels.update({id(near.sketch_keys): "sketch keys", id(near.bands._table): "band keys",
                   id(near.passages): "passages", id(s._rows._exact): "exact", id(s._entries._id_table): "ids"})
    start_rss = _status("VmRSS")
    rng = np.random.default_rng(SEED)
    started = time.perf_counter()
    for base in range(0, n_docs, BATCH):
        n = min(BATCH, n_docs - base)
        fps = rng.integers(0, 2**63, n, dtype=np.int64).tolist()
        values = rng.integers(0, 0xFFFF, (n, SKETCH_SIZE), dtype=np.uint16)
        shingles = rng.integers(100, 3000, n).tolist()
        hashes = rng.integers(0, 256, (n, 16), dtype=np.uint8)
        for i in range(n):
            peaks.docs = base + i + 1
            s.add(f"doc-{base + i:08d}-0123456789", hashes[i].tobytes().hex(),
                  features_of(fps[i], [], Sketch(values[i].copy(), shingles[i])))
    figures = {"add_s": round(time.perf_counter() - started, 1), "start_rss": start_rss,
               "before_close_rss": _status("VmRSS"), "nbytes": store_bytes(s)}
    deduper.close()
    return figures


def run(args: argparse.Namespace) -> Result:
    n_docs = args.docs
    peaks = Peaks()
    directory = Path(tempfile.mkdtemp(prefix="store-peaks-"))
    try:
        figures = fill(directory, n_docs, peaks)
        closed_rss = _status("VmRSS")
        reopened = peaks.measure("reopening the store (load)", lambda: Deduper.open(DedupConfig(), directory))
        after_load = _status("VmRSS")
        reopened.close()
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    mib = common.mib
    calls = sorted(peaks.worst.items(), key=lambda kv: -kv[1].over)
    rows = [[name, c.calls, mib(c.over), mib(c.rss_in), mib(c.peak), f"{c.docs:,}"] for name, c in calls]
    calls_table = common.table(["call", "calls", "worst: peak above RSS at entry", "RSS at entry", "peak",
                                "after docs"], rows)
    totals = [["RSS at start (interpreter, numpy, the engine)", mib(figures["start_rss"])],
              [f"RSS after {n_docs:,} documents, before the final save", mib(figures["before_close_rss"])],
              ["store_bytes() then (pending entries at 100 B)", mib(sum(figures["nbytes"].values()))],
              ["peak RSS of the whole run", mib(peaks.overall)],
              ["RSS once that store is closed and dropped", mib(closed_rss)],
              ["RSS after reopening it", mib(after_load)]]
    totals_table = common.table(["process", "RSS"], totals)
    results = {"docs": n_docs, **figures, "overall_peak": peaks.overall, "closed_rss": closed_rss,
               "after_load_rss": after_load, "calls": {name: vars(c) for name, c in calls}}
    return Result(results, [calls_table, totals_table])


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--docs", type=positive, default=DEFAULT_DOCS, help="documents added (default %(default)s)")


def check() -> None:
    if not Path("/proc/self/clear_refs").exists():
        raise SystemExit("store_peaks needs Linux (/proc/self/clear_refs resets the peak-RSS counter)")


BENCHMARKS = (Benchmark("store_peaks", __doc__, run, options, check=check),)
