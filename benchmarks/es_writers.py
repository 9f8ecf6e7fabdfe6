"""Several writer processes on one index: near repeats missed because of concurrency, before and after reconcile.

The labelled accuracy set (``corpora.corpus.build_accuracy_set``: originals, 0–3 edited reposts each,
look-alike pairs) is dealt round-robin to 1, 2, 4 (``--writers``) writer processes, which start together
and each ``es ingest`` their share in the global order (annotate mode, so every document lands in the
index with its verdict; one worker process each).  A repost whose original went to another writer is
found once that writer claimed its keys in the registry (registry.py), which it does before its verdict
is returned, and two claims that cross in flight are judged by the one landing second; what is missed
is the order the writers judged in (a cut copy claimed before the text that contains it stays unique,
as it would on one writer fed them in that order), and ``es_plugin.commands.reconcile`` runs afterwards.

Counted against the ground truth groups (a group of n documents holds n - 1 repeats, whichever came
first): ``missed`` = repeats stored as unique (unique documents per group beyond the first); ``split`` =
extra clusters per group; ``false merges`` = clusters that mix groups.  One writer is the baseline:
what the engine itself misses.  ``copies delivered beyond one writer`` = per ground truth group, the
originals the writers keep beyond those one writer judging the input in its order keeps (0 where
fewer), summed: what ``drop`` mode delivers of a story beyond one writer.  It does not say which
document was kept (a group whose writers keep as many as one writer counts 0 whichever they kept, and
the engine's own misses count 0 here where ``missed`` counts them): it sits beside the per-document
counts, not in their place.

And against one writer judging in the order the writers' claims define (issue 38: several writers judge
as one writer would): each stored document's place is read before reconcile
(es_plugin/commands/order.py, the order ``es reconcile`` judges in: an original's the smallest stamp its
content hash holds in the registry, a repeat's just after both its ``seen_at`` and the place of the
document it names); the embedded engine (same ``DedupConfig``: its verdicts equal Elasticsearch's on one writer) then judges
every text in that order.  ``missed vs one`` = documents it finds repeats that the writers stored as
unique; ``extra vs one`` = documents the writers marked repeats that it keeps.  Each such document is
listed in the results (``vs_one``, and ``vs_one_after`` reconcile) with its place, writer and what it was judged against, to read.

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
from es_plugin.commands.order import Placed, claim_stamps, places
from es_plugin.commands.reconcile import reconcile
from es_plugin.index.template import install, registry_name, template_name
from scrapy_zhdedup.config import DedupConfig, EsConfig
from scrapy_zhdedup.deduper import Deduper
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


def scores(stored: dict[str, dict[str, Any]], records: list[Record], one: dict[str, str],
           in_input: dict[str, str]) -> dict[str, int]:
    """The counts against the ground truth groups, against ``one`` (each document's status judged by one
    writer in the claims' order), and the copies kept beyond ``in_input`` (one writer in input order)."""
    group = {r.id: r.group for r in records}
    members: dict[str, int] = defaultdict(int)
    uniques: dict[str, int] = defaultdict(int)
    kept_alone: dict[str, int] = defaultdict(int)
    for doc_id, z in stored.items():
        members[group[doc_id]] += 1
        uniques[group[doc_id]] += z["status"] == "unique"
        kept_alone[group[doc_id]] += in_input[doc_id] == "unique"
    clusters_of: dict[str, set[str]] = defaultdict(set)
    groups_of: dict[str, set[str]] = defaultdict(set)
    for doc_id, z in stored.items():
        clusters_of[group[doc_id]].add(z["cluster"])
        groups_of[z["cluster"]].add(group[doc_id])
    return {"docs": len(stored), "repeats": sum(members.values()) - len(members),
            "missed": sum(n - 1 for n in uniques.values() if n),
            "copies_beyond_one": sum(max(0, n - kept_alone[g]) for g, n in uniques.items()),
            "split": sum(len(c) - 1 for c in clusters_of.values()),
            "false_merges": sum(1 for g in groups_of.values() if len(g) > 1),
            "missed_vs_one": len(missed_vs_one(stored, one)), "extra_vs_one": len(extra_vs_one(stored, one))}


def missed_vs_one(stored: dict[str, dict[str, Any]], one: dict[str, str]) -> list[str]:
    """Documents one writer in the claims' order finds repeats, stored as unique."""
    return sorted(d for d, z in stored.items() if z["status"] == "unique" and one[d] != "unique")


def extra_vs_one(stored: dict[str, dict[str, Any]], one: dict[str, str]) -> list[str]:
    """Documents stored as repeats that one writer in the claims' order keeps."""
    return sorted(d for d, z in stored.items() if z["status"] != "unique" and one[d] == "unique")


def stored_objects(client: Elasticsearch, index: str) -> dict[str, dict[str, Any]]:
    """Each document's ``zhdedup`` object (with its ``_id``), by document id."""
    client.indices.refresh(index=index)
    return {hit["url"]: {**hit["zhdedup"], "_id": hit["_id"]} for hit in scan(client, index)}


VIEWED = ("status", "cluster", "hash", "dup_of", "seen_at")


def scan(client: Elasticsearch, index: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    after = None
    while True:
        page = client.search(index=index, size=5000, sort=[{"zhdedup.hash": "asc"}, {"zhdedup.doc_id": "asc"}],
                             search_after=after, source_includes=["url", *(f"zhdedup.{f}" for f in VIEWED)])
        hits = page["hits"]["hits"]
        if not hits:
            return out
        out.extend({**h["_source"], "_id": h["_id"]} for h in hits)
        after = hits[-1]["sort"]


def claim_order(stored: dict[str, dict[str, Any]], stamps: dict[str, str]) -> dict[str, str]:
    """Each document's place in the order the claims define (es_plugin/commands/order.py, the order
    ``es reconcile`` judges in)."""
    ids = list(stored)
    docs = [Placed(stored[d]["_id"], d, stored[d]["status"], stored[d].get("seen_at"), stored[d].get("dup_of"))
            for d in ids]
    return dict(zip(ids, places(docs, stamps)))


def one_writer(records: list[Record]) -> dict[str, str]:
    """Each document's status when one writer (the embedded engine) judges them all in this order."""
    deduper = Deduper(DEDUP)
    return {r.id: deduper.judge(r.id, text=r.text).status for r in records}


def differences(stored: dict[str, dict[str, Any]], records: list[Record], place: dict[str, str],
                one: dict[str, str], writers: int) -> list[dict[str, Any]]:
    """Every document judged otherwise than one writer in the claims' order, to read: its place, its
    writer (round-robin share), its group, and what each side judged."""
    position = {r.id: i for i, r in enumerate(records)}
    group = {r.id: r.group for r in records}
    return [{"doc": d, "why": why, "group": group[d], "writer": position[d] % writers, "place": place[d],
             "stored": {k: stored[d].get(k) for k in ("status", "dup_of", "seen_at")}, "one": one[d],
             "group_members": sorted((place[m], m, stored[m]["status"], stored[m].get("dup_of"), one[m],
                                      position[m] % writers) for m in stored if group[m] == group[d])}
            for why, found in (("missed", missed_vs_one(stored, one)), ("extra", extra_vs_one(stored, one)))
            for d in found]


def kept_groups(stored: dict[str, dict[str, Any]], records: list[Record], place: dict[str, str],
                in_input: dict[str, str], writers: int) -> list[dict[str, Any]]:
    """Every ground truth group whose repeats count as missed (it keeps more than one original), to read:
    how many the writers keep and one writer in input order keeps, and each member's input position,
    writer, place, stored status and what it names, and its status in input order."""
    position = {r.id: i for i, r in enumerate(records)}
    members: dict[str, list[str]] = defaultdict(list)
    for r in records:
        if r.id in stored:
            members[r.group].append(r.id)
    out = []
    for group, ids in members.items():
        kept = sum(stored[d]["status"] == "unique" for d in ids)
        if kept > 1:
            out.append({"group": group, "kept": kept, "kept_in_input_order": sum(in_input[d] == "unique" for d in ids),
                        "members": [(d, position[d], position[d] % writers, place[d], stored[d]["status"],
                                     stored[d].get("dup_of"), in_input[d]) for d in ids]})
    return out


def run(args: argparse.Namespace) -> Result:
    records = build_accuracy_set(n_base=args.n_base)
    client = Elasticsearch(args.url, request_timeout=600)
    ctx = mp.get_context("spawn")
    rows: list[dict[str, Any]] = []
    in_input = one_writer(records)
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
        stored = stored_objects(client, index)
        place = claim_order(stored, claim_stamps(client, index))
        one = one_writer(sorted((r for r in records if r.id in place), key=lambda r: (place[r.id], r.id)))
        before = scores(stored, records, one, in_input)
        vs_one = differences(stored, records, place, one, n)
        missed_groups = kept_groups(stored, records, place, in_input, n)
        started = time.perf_counter()
        result = reconcile(client, index, DEDUP)
        reconcile_s = time.perf_counter() - started
        reconciled = stored_objects(client, index)
        after = scores(reconciled, records, one, in_input)
        vs_one_after = differences(reconciled, records, place, one, n)
        rows.append({"writers": n, "seconds": seconds, "items_s": len(records) / seconds, "before": before,
                     "after": after, "reconcile": result, "reconcile_s": reconcile_s, "vs_one": vs_one,
                     "vs_one_after": vs_one_after, "missed_groups": missed_groups})
        print(f"# writers={n}: before {before} after {after} reconcile {result}", file=sys.stderr)
        for diff in vs_one + vs_one_after:
            print(f"#   {diff}", file=sys.stderr)
        if not args.keep:
            client.indices.delete(index=[index, registry_name(index)], ignore_unavailable=True)
            client.options(ignore_status=404).indices.delete_index_template(name=template_name(index))
    table = common.table(
        ["writers", "items/s (all writers)", "missed before", "copies delivered beyond one writer",
         "missed vs one writer in stamp order", "extra vs one",
         "missed after reconcile", "vs one after", "extra after", "split before", "split after",
         "false merges before", "after", "pairs marked", "reconcile s"],
        [[r["writers"], round(r["items_s"]),
          f"{r['before']['missed']} ({r['before']['missed'] / max(1, r['before']['repeats']):.1%})",
          f"{r['before']['copies_beyond_one']} "
          f"({r['before']['copies_beyond_one'] / max(1, r['before']['repeats']):.1%})",
          f"{r['before']['missed_vs_one']} ({r['before']['missed_vs_one'] / max(1, r['before']['repeats']):.1%})",
          r["before"]["extra_vs_one"], r["after"]["missed"], r["after"]["missed_vs_one"], r["after"]["extra_vs_one"],
          r["before"]["split"],
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
