"""Several writer processes on one index: near repeats missed because of concurrency, before and after reconcile.

The labelled accuracy set (``corpora.corpus.build_accuracy_set``: originals, 0–3 edited reposts each,
look-alike pairs) is dealt round-robin to 1, 2 and 4 writer processes, which start together and each
``es ingest`` their share in the global order (annotate mode, so every document lands in the index with
its verdict; one worker process each).  A repost whose original went to another writer is found once
that writer claimed its keys in the registry (registry.py), which it does before its verdict is
returned; what is missed is two texts in flight at once whose claims crossed (the later-stamped one
claimed first), stored as unique, which ``es_plugin.commands.reconcile`` repairs afterwards.

Counted against the ground truth groups (a group of n documents holds n - 1 repeats, whichever came
first): ``missed`` = repeats stored as unique (unique documents per group beyond the first); ``split`` =
extra clusters per group; ``false merges`` = clusters that mix groups.  One writer is the baseline:
what the engine itself misses.

    python -m benchmarks es_writers --url "$(bash scripts/es-node.sh url)" [--n-base 600] [--writers 1,2,4,8]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import queue
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from elasticsearch import Elasticsearch

from benchmarks import common
from benchmarks.runner import Benchmark, Result, positive
from corpora.corpus import Record, build_accuracy_set
from es_plugin.commands.ingest import ingest
from es_plugin.commands.reconcile import reconcile
from es_plugin.index.template import install, registry_name, template_name
from scrapy_zhdedup.config import DedupConfig, EsConfig
from scrapy_zhdedup.index.bands import BandLayout
from scrapy_zhdedup.similarity.fingerprinter import Fingerprinter

DEDUP = DedupConfig()


def writer(url: str, index: str, records: list[tuple[str, str]], bulk_size: int, flush_interval: float,
           barrier: Any, out: Any) -> None:
    """One ``es ingest`` writer process (one worker: the writers share the cores): its share as a JSONL
    file, judged in order in batches; starts when every writer is ready."""
    warm = Fingerprinter(DEDUP)
    warm.fingerprint(warm.clean(text="预热分词词典，使各进程同时开始。"))
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "share.jsonl"
        with source.open("w", encoding="utf-8") as fh:
            for doc_id, text in records:
                fh.write(json.dumps({"id": doc_id, "text": text, "url": doc_id}, ensure_ascii=False) + "\n")
        es = EsConfig(es_url=url, es_index=index, es_bulk_size=bulk_size, es_flush_interval=flush_interval,
                      es_dead_letter=str(Path(tmp) / "dead-letter.jsonl"))
        barrier.wait()
        started = time.perf_counter()
        ingest([source], DEDUP, es, checkpoint_dir=Path(tmp) / "ck", workers=1)
        out.put(time.perf_counter() - started)


def collect(out: Any, procs: list[Any]) -> list[float]:
    """Each writer's elapsed seconds; fails fast when a writer died instead of waiting forever."""
    results: list[float] = []
    while len(results) < len(procs):
        try:
            results.append(out.get(timeout=5))
        except queue.Empty:
            dead = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
            if dead:
                raise SystemExit(f"a writer process failed (exit codes {dead})") from None
    for p in procs:
        p.join()
    return results


def scores(client: Elasticsearch, index: str, records: list[Record]) -> dict[str, int]:
    client.indices.refresh(index=index)
    stored = {}
    for hit in scan(client, index):
        stored[hit["url"]] = hit["zhdedup"]
    group = {r.id: r.group for r in records}
    members: dict[str, int] = defaultdict(int)
    uniques: dict[str, int] = defaultdict(int)
    for doc_id, z in stored.items():
        members[group[doc_id]] += 1
        uniques[group[doc_id]] += z["status"] == "unique"
    clusters_of: dict[str, set[str]] = defaultdict(set)
    groups_of: dict[str, set[str]] = defaultdict(set)
    for doc_id, z in stored.items():
        clusters_of[group[doc_id]].add(z["cluster"])
        groups_of[z["cluster"]].add(group[doc_id])
    return {"docs": len(stored), "repeats": sum(members.values()) - len(members),
            "missed": sum(n - 1 for n in uniques.values() if n),
            "split": sum(len(c) - 1 for c in clusters_of.values()),
            "false_merges": sum(1 for g in groups_of.values() if len(g) > 1)}


def scan(client: Elasticsearch, index: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    after = None
    while True:
        page = client.search(index=index, size=5000, sort=[{"zhdedup.hash": "asc"}, {"zhdedup.doc_id": "asc"}],
                             search_after=after, source_includes=["url", "zhdedup.status", "zhdedup.cluster"])
        hits = page["hits"]["hits"]
        if not hits:
            return out
        out.extend(h["_source"] for h in hits)
        after = hits[-1]["sort"]


def run(args: argparse.Namespace) -> Result:
    records = build_accuracy_set(n_base=args.n_base)
    client = Elasticsearch(args.url, request_timeout=600)
    ctx = mp.get_context("spawn")
    rows: list[dict[str, Any]] = []
    for n in (int(w) for w in args.writers.split(",")):
        index = f"bench-writers-{n}"
        client.options(ignore_status=404).indices.delete(index=[index, registry_name(index)], ignore_unavailable=True)
        install(client, index, BandLayout.from_config(DEDUP))
        barrier, out = ctx.Barrier(n), ctx.Queue()
        shares = [[(r.id, r.text) for r in records[i::n]] for i in range(n)]
        procs = [ctx.Process(target=writer, args=(args.url, index, share, args.bulk_size, args.flush_interval,
                                                  barrier, out)) for share in shares]
        for p in procs:
            p.start()
        seconds = max(collect(out, procs))
        before = scores(client, index, records)
        started = time.perf_counter()
        result = reconcile(client, index, DEDUP)
        reconcile_s = time.perf_counter() - started
        after = scores(client, index, records)
        rows.append({"writers": n, "seconds": seconds, "items_s": len(records) / seconds, "before": before,
                     "after": after, "reconcile": result, "reconcile_s": reconcile_s})
        print(f"# writers={n}: before {before} after {after} reconcile {result}", file=sys.stderr)
        if not args.keep:
            client.indices.delete(index=[index, registry_name(index)], ignore_unavailable=True)
            client.options(ignore_status=404).indices.delete_index_template(name=template_name(index))
    table = common.table(
        ["writers", "items/s (all writers)", "missed before", "missed after reconcile", "split before", "split after",
         "false merges before", "after", "pairs marked", "reconcile s"],
        [[r["writers"], round(r["items_s"]),
          f"{r['before']['missed']} ({r['before']['missed'] / max(1, r['before']['repeats']):.1%})",
          r["after"]["missed"], r["before"]["split"],
          r["after"]["split"], r["before"]["false_merges"], r["after"]["false_merges"], r["reconcile"]["marked"],
          f"{r['reconcile_s']:.1f}"] for r in rows])
    head = (f"{len(records)} documents, {rows[0]['before']['repeats']} repeats; bulk size {args.bulk_size}, "
            f"flush interval {args.flush_interval} s")
    return Result(rows, [f"{head}\n{table}"])


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--n-base", type=positive, default=600, help="original articles (default %(default)s)")
    parser.add_argument("--writers", default="1,2,4")
    parser.add_argument("--bulk-size", type=positive, default=EsConfig.es_bulk_size)
    parser.add_argument("--flush-interval", type=float, default=EsConfig.es_flush_interval)
    parser.add_argument("--keep", action="store_true")


BENCHMARKS = (Benchmark("es_writers", __doc__, run, options, node="required"),)
