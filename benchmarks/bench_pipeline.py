"""Whole-pipeline throughput: ``zhdedup scan`` vs a naive jieba+simhash pipeline vs datasketch.

    python -m benchmarks.bench_pipeline [--docs 2000] [--repeat 3]
    python -m benchmarks.bench_pipeline --docs 100000          # bounded-memory run (ours only)

Input: ``corpora.corpus.build_scan_file`` — real news articles, then "mosaics" of real
sentences, 30 % reposts of earlier documents, 10 % of the lines also carrying a full HTML
page (cached under ``$ZHDEDUP_BENCH_CACHE``, default /tmp/zhdedup-bench).  Every contender
judges each document against all before it:

* ``zhdedup scan`` — the real CLI in a subprocess (wall time including interpreter start
  and dictionary loading, its own docs/s line, and its peak RSS), and the engine in-process;
* naive — ``jieba.lcut`` + ``simhash.Simhash(tokens)`` + ``simhash.SimhashIndex(k=3)``
  (``get_near_dups`` then ``add``): the usual first attempt;
* datasketch — character 3-gram MinHash (128 permutations) + ``MinHashLSH(threshold=0.5)``
  (``query`` then ``insert``).

The baselines read the ``text`` field; ours reads ``html`` where a line has it (as the CLI
does), so it also pays for HTML extraction on those lines.  In-process contenders run in
turns, ``--repeat`` times, and the best run counts (a shared 2-core machine is noisy).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from benchmarks import common
from benchmarks.store_bytes import store_bytes
from corpora.corpus import DEFAULT_SEED, build_scan_file
from scrapy_zhdedup.config import DedupConfig
from scrapy_zhdedup.deduper import Deduper
from scrapy_zhdedup.errors import EmptyTextError

NUM_PERM = 128
NAIVE = "naive: jieba.lcut + Simhash + SimhashIndex(k=3)"
DATASKETCH = "datasketch: 3-gram MinHash(128) + MinHashLSH(0.5)"
DEFAULT_DOCS = 2000
BASELINES_UP_TO = 20_000  # above this the baselines are skipped unless asked for (hours of CPU)
_CLI_RATE = re.compile(r"zhdedup scan: (\d+) judged .*?, ([\d.]+) s, (\d+) docs/s")


class Doc(NamedTuple):
    id: str
    text: str
    html: str | None


def scan_file(n_docs: int, seed: int) -> Path:
    """The cached scan file for ``(n_docs, seed)``, built on first use (same seed, same bytes)."""
    path = common.CACHE_DIR / f"scan-{n_docs}-{seed}.jsonl"
    if not path.exists():
        common.CACHE_DIR.mkdir(parents=True, exist_ok=True)
        print(f"building {path} ...", flush=True)
        t0 = time.perf_counter()
        partial = path.with_suffix(".partial")
        counts = build_scan_file(partial, n_docs, seed)
        partial.replace(path)
        print(f"  {dict(sorted(counts.items()))} in {time.perf_counter() - t0:.0f} s", flush=True)
    return path


def read_docs(path: Path) -> list[Doc]:
    with open(path, encoding="utf-8") as fh:
        return [Doc(d["id"], d["text"], d.get("html")) for d in map(json.loads, fh)]


# --- contenders (each judges all docs, returns how many it called duplicates) --------------


def run_ours(docs: Sequence[Doc], checkpoints: list[tuple[int, int, float]] | None = None) -> Counter[str]:
    """The engine on every document; ``checkpoints`` gets (documents judged, RSS, seconds) ten times."""
    if checkpoints is not None:
        checkpoints.clear()
    deduper = Deduper(DedupConfig())
    counts: Counter[str] = Counter()
    every = max(1, len(docs) // 10)
    started = time.perf_counter()
    for i, doc in enumerate(docs, 1):
        try:
            counts[deduper.check(doc.id, text=doc.text, html=doc.html).status] += 1
        except EmptyTextError:
            counts["empty"] += 1
        if checkpoints is not None and i % every == 0:
            checkpoints.append((i, common.rss_bytes(), time.perf_counter() - started))
    for part, size in store_bytes(deduper.store).items():
        counts[f"store_{part}"] = size
    return counts


def run_naive(docs: Sequence[Doc]) -> Counter[str]:
    import jieba
    from simhash import Simhash, SimhashIndex

    index = SimhashIndex([], k=3)
    counts: Counter[str] = Counter()
    for doc in docs:
        fp = Simhash(jieba.lcut(doc.text))
        counts["duplicate" if index.get_near_dups(fp) else "unique"] += 1
        index.add(doc.id, fp)
    return counts


def run_datasketch(docs: Sequence[Doc]) -> Counter[str]:
    from datasketch import MinHash, MinHashLSH

    lsh = MinHashLSH(threshold=0.5, num_perm=NUM_PERM)
    counts: Counter[str] = Counter()
    for doc in docs:
        text = doc.text
        m = MinHash(num_perm=NUM_PERM)
        m.update_batch([g.encode("utf-8") for g in {text[i : i + 3] for i in range(max(1, len(text) - 2))}])
        counts["duplicate" if lsh.query(m) else "unique"] += 1
        lsh.insert(doc.id, m)
    return counts


class CliRun(NamedTuple):
    wall_s: float
    own_rate: float  # the docs/s the CLI prints (judging only, after start-up)
    peak_rss: int
    summary: str


def zhdedup_command() -> list[str]:
    script = Path(sys.executable).with_name("zhdedup")
    return [str(script)] if script.exists() else [sys.executable, "-m", "scrapy_zhdedup.cli"]


def run_cli(path: Path) -> CliRun:
    """``zhdedup scan`` in a subprocess; its peak RSS comes from ``wait4`` (that child only)."""
    cmd = [*zhdedup_command(), "scan", str(path), "-o", os.devnull]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    with proc.stderr:
        stderr = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{stderr}")
    match = _CLI_RATE.search(stderr)
    if match is None:
        raise RuntimeError(f"no summary line in the output of zhdedup scan:\n{stderr}")
    return CliRun(wall, float(match.group(3)), usage.ru_maxrss * 1024, match.group(0))


# --- the benchmark ------------------------------------------------------------------------------


def run(n_docs: int, seed: int, repeat: int, baselines: bool) -> tuple[dict[str, Any], list[str]]:
    path = scan_file(n_docs, seed)
    docs = read_docs(path)
    html_docs = sum(d.html is not None for d in docs)
    avg_chars = sum(len(d.text) for d in docs) / len(docs)
    print(f"{len(docs):,} documents ({html_docs:,} with HTML), {avg_chars:.0f} characters on average, "
          f"{path.stat().st_size / 2**20:.1f} MiB\n", flush=True)
    import jieba

    jieba.initialize()  # the naive baseline's dictionary load is start-up, not throughput
    outcome: dict[str, Counter[str]] = {}
    cli_runs: list[CliRun] = []
    checkpoints: list[tuple[int, int, float]] = []

    def keep(name: str, fn: Callable[[], Counter[str]]) -> Callable[[], None]:
        return lambda: outcome.__setitem__(name, fn())

    contenders: dict[str, Callable[[], None]] = {
        "zhdedup scan (CLI subprocess)": lambda: cli_runs.append(run_cli(path)),
        "ours, engine in-process": keep("ours", lambda: run_ours(docs, checkpoints)),
    }
    if baselines:
        contenders[NAIVE] = keep("naive", lambda: run_naive(docs))
        contenders[DATASKETCH] = keep("datasketch", lambda: run_datasketch(docs))
    rss_before = common.rss_bytes()
    times = common.interleaved(contenders, repeat)

    best = {name: min(ts) for name, ts in times.items()}
    best_cli = min(cli_runs, key=lambda r: r.wall_s)
    naive_rate = common.rate(len(docs), best[NAIVE]) if baselines else None
    rows, results = [], {"docs": len(docs), "html_docs": html_docs, "avg_chars": avg_chars, "seconds": times}

    def add(name: str, docs_s: float, dups: int | None, note: str) -> None:
        ratio = f"{docs_s / naive_rate:.1f}x" if naive_rate else "-"
        rows.append([name, docs_s, ratio, dups, note])
        results[name] = {"docs_per_s": docs_s, "vs_naive": docs_s / naive_rate if naive_rate else None,
                         "duplicates": dups}

    add("zhdedup scan (CLI), judging", best_cli.own_rate, None, "rate printed by the CLI, after start-up")
    add("zhdedup scan (CLI), wall clock", common.rate(len(docs), best_cli.wall_s), None,
        f"incl. start-up; peak RSS {common.mib(best_cli.peak_rss)}")
    ours = outcome["ours"]
    store = {k.removeprefix("store_"): v for k, v in ours.items() if k.startswith("store_")}
    store_bytes = sum(store.values())
    add("ours, engine in-process", common.rate(len(docs), best["ours, engine in-process"]),
        ours["exact"] + ours["near"], f"{ours['exact']} exact + {ours['near']} near")
    if baselines:
        for key, name in (("naive", NAIVE), ("datasketch", DATASKETCH)):
            add(name, common.rate(len(docs), best[name]), outcome[key]["duplicate"], "")
    results["cli"] = {"summary": best_cli.summary, "wall_s": best_cli.wall_s, "peak_rss_bytes": best_cli.peak_rss}
    results["in_process"] = {"store_bytes": store, "store_bytes_per_doc": store_bytes / len(docs),
                             "rss_before_bytes": rss_before, "rss_checkpoints": checkpoints}
    tables = [common.table(["pipeline", "docs/s", "vs naive", "flagged duplicate", "note"], rows)]
    if checkpoints:
        tables.append(common.table(
            ["docs judged (in-process engine, last run)", "process RSS (all documents held in memory)",
             "docs/s since the previous row"],
            [[n, common.mib(rss), common.rate(n - n0, t - t0)]
             for (n, rss, t), (n0, _, t0) in zip(checkpoints, [(0, 0, 0.0), *checkpoints])]
            + [["engine store (EmbeddedStore.nbytes)", f"{common.mib(store_bytes)} = {store_bytes / len(docs):.0f} B/doc", ""]]
            + [[f"  of which {part}", f"{size / len(docs):.0f} B/doc", ""] for part, size in store.items()]))
    return results, tables


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_pipeline", description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=DEFAULT_DOCS, help="documents in the scan file (default %(default)s)")
    parser.add_argument("--repeat", type=int, default=None, help="runs per contender (default 5, or 1 above 20k docs)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--baselines", dest="baselines", action="store_true", default=None,
                       help=f"run the baselines even above {BASELINES_UP_TO:,} documents")
    group.add_argument("--no-baselines", dest="baselines", action="store_false")
    args = parser.parse_args(argv)
    if args.docs < 1:
        parser.error("--docs must be positive")
    baselines = args.baselines if args.baselines is not None else args.docs <= BASELINES_UP_TO
    repeat = args.repeat if args.repeat is not None else (5 if args.docs <= BASELINES_UP_TO else 1)
    if repeat < 1:
        parser.error("--repeat must be positive")
    if shutil.which(zhdedup_command()[0]) is None:
        parser.error(f"cannot run {zhdedup_command()[0]}")
    info = common.start(f"Pipeline throughput on {args.docs:,} news documents")
    results, tables = run(args.docs, args.seed, repeat, baselines)
    for t in tables:
        print(t + "\n")
    name = "pipeline" if args.docs == DEFAULT_DOCS else f"pipeline-{args.docs}"
    common.write_results(name, info, {**vars(args), "repeat": repeat, "baselines": baselines}, results, tables)
    return 0


if __name__ == "__main__":
    sys.exit(main())
