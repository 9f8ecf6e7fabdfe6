"""What an index costs as it grows: bytes per document by field, the near lookup's node CPU and latency by
shard count, and the node CPU of ``es ingest`` against plain ``helpers.bulk`` of the same documents.

Three benchmarks, each its own results file; node CPU is read from ``_nodes/stats``
(``process.cpu.total_in_millis``), never wall time, after the node went quiet:

* ``es_disk``: ``zhdedup es ingest`` (annotate mode) of ``--docs`` documents of the throughput corpus (real
  news, sentence mosaics, 30 % reposts, half of them as HTML pages) into a fresh index, force-merged to
  one segment, then ``_disk_usage?run_expensive_tasks=true``: bytes per document of each field and how
  (inverted index, stored fields, doc values, norms, points); its key registry (one document per band key
  claimed) force-merged too, its bytes per judged document and per key, and both together;
* ``es_ingest_cpu``: the node's CPU per judged document of ``es ingest`` and of ``elasticsearch.helpers.bulk`` of
  exactly the documents that ingest stored (read back from its index) into an index with the same
  template, taking turns ``--repeat`` times; beside them ``zhdedup scan`` of the same file, and the wall
  time and the processes' own CPU of each (``es ingest --workers 1`` against ``scan --workers 1``);
* ``es_shards``: ``es_lookup``'s index of ``--docs`` documents (real articles and sentence mixtures,
  the keys collide as real ones do) loaded once on one shard and force-merged, then split (``_split``:
  hard links, no reload) into 3 and 6 shards, each force-merged to one segment per shard, its key
  registry split the same; the reposts of the real articles looked up as ``EsLookups`` does (realtime
  ``mget`` of the hash and the registry's two ``mget``, together): latency one document at a time,
  and node CPU per document in batches of ``--batch``, the three indices taking turns ``--repeat``
  times.  The registry is loaded by bulk ``create`` of exactly the key documents ``registry.fill`` writes
  (``es_lookup.KeyOwners``; equal ids and sources checked on 5,000 documents): ``fill`` itself took 178 s
  for 50,000 documents, an hour at 1M.  Splitting instead of loading three times saves two loads.

    python -m benchmarks es_disk --url URL [--docs 20000]
    python -m benchmarks es_ingest_cpu --url URL [--docs 3000 | --news] [--repeat 3] [--workers 2]
    python -m benchmarks es_shards --url URL [--docs 1000000] [--shards 1,3,6] [--repeat 3] [--keep]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import resource
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from elasticsearch import AsyncElasticsearch, Elasticsearch, helpers

from benchmarks import common
from benchmarks.common import fresh_index, run_cli
from benchmarks.es_lookup import load, percentile, real_articles, reposts, sentence_pool
from benchmarks.runner import Benchmark, Result, positive
from benchmarks.throughput import news_file
from corpora.corpus import scan_file
from es_plugin.backend.lookups import EsLookups
from es_plugin.backend.retry import RetryPolicy
from es_plugin.backend.stats import EsStats
from es_plugin.index.document import query_features
from es_plugin.index.template import install, registry_name
from es_plugin.operations import adrive
from scrapy_zhdedup.config import DedupConfig
from scrapy_zhdedup.index.bands import BandLayout
from scrapy_zhdedup.index.nearindex import CandidateKeys
from scrapy_zhdedup.model import Features
from scrapy_zhdedup.similarity.fingerprinter import Fingerprinter
from scrapy_zhdedup.similarity.rule import NearRule
from scrapy_zhdedup.text.clean import content_hash

PREFIX = "zhdedup-bench-sizing"
DEFAULT_SEED = 20261123
HTML_RATE = 0.5  # the throughput corpus
BULK = 1000  # ZHDEDUP_ES_BULK_SIZE's default; helpers.bulk gets the same chunks
_KINDS = ("inverted_index", "stored_fields", "doc_values", "norms", "points", "term_vectors", "knn_vectors")


def ingest(url: str, index: str, path: Any, workers: int) -> int:
    """``zhdedup es ingest`` into a fresh index; returns the documents it judged."""
    out = run_cli(["es", "ingest", "--url", url, "--index", index, "--workers", str(workers), "--restart",
                   "--checkpoint-dir", f"/tmp/{index}-ck", "--dead-letter", f"/tmp/{index}-dead.jsonl", str(path)])[1]
    return int(out.split("zhdedup es ingest: ", 1)[1].split(" judged", 1)[0])


def node_cpu_of(client: Elasticsearch, run: Any) -> tuple[float, Any]:
    """The node's CPU seconds from a quiet node to a quiet node again, around ``run()``, and what it returned."""
    common.wait_until_quiet(client)
    before = common.node_cpu_ms(client)
    result = run()
    common.wait_until_quiet(client, limit=60)  # the merges its writes set off are its cost too
    return (common.node_cpu_ms(client) - before) / 1000, result


# --- disk ---------------------------------------------------------------------------------------------


def disk(args: argparse.Namespace, client: Elasticsearch) -> tuple[dict[str, Any], list[str]]:
    index = f"{PREFIX}-disk"
    fresh_index(client, index)
    path = scan_file(args.docs, DEFAULT_SEED, HTML_RATE)
    judged = ingest(args.url, index, path, args.workers)
    registry = registry_name(index)
    client.indices.refresh(index=[index, registry])
    client.options(request_timeout=3600).indices.forcemerge(index=[index, registry], max_num_segments=1)
    docs = client.count(index=index)["count"]
    usage = client.options(request_timeout=3600).perform_request(
        "POST", f"/{index}/_disk_usage", params={"run_expensive_tasks": "true"}, headers={"accept": "application/json"})
    report = usage.body[index]
    sizes = client.indices.stats(index=[index, registry], metric="store,docs")["indices"]
    store = sizes[index]["primaries"]["store"]["size_in_bytes"]
    keys_bytes, keys = (sizes[registry]["primaries"]["store"]["size_in_bytes"],
                        sizes[registry]["primaries"]["docs"]["count"])
    fields = {name: {"total": f["total_in_bytes"], **{k: _kind(f, k) for k in _KINDS}}
              for name, f in report["fields"].items()}
    rows = sorted(fields.items(), key=lambda item: -item[1]["total"])
    table = common.table(["field", "bytes/doc", "share", *(k.replace("_", " ") for k in _KINDS[:5])], [
        (name, f["total"] / docs, f"{f['total'] / report['store_size_in_bytes']:.1%}",
         *(f[k] / docs for k in _KINDS[:5])) for name, f in rows if f["total"] / docs >= 0.5])
    parts = source_parts(client, index)
    source_table = common.table(["part of _source", "JSON bytes/doc (uncompressed)", "share"],
                                [(name, n, f"{n / sum(parts.values()):.1%}") for name, n in parts.items()])
    if not args.keep:
        fresh_index(client, index)
    chars = [len(line) for line in path.read_text(encoding="utf-8").splitlines()]
    summary = {"docs": docs, "judged": judged, "store_bytes": store, "bytes_doc": store / docs,
               "disk_usage_bytes_doc": report["store_size_in_bytes"] / docs, "fields": fields,
               "mean_jsonl_line_chars": statistics.mean(chars), "source_parts_json_bytes_doc": parts,
               "registry": {"key_documents": keys, "store_bytes": keys_bytes, "bytes_doc": keys_bytes / docs,
                            "bytes_key": keys_bytes / max(keys, 1)},
               "index_and_registry_bytes_doc": (store + keys_bytes) / docs}
    return summary, [f"{docs:,} documents, {store / docs:,.0f} bytes each on disk (one segment); their key registry "
                     f"{keys:,} key documents, {keys_bytes / docs:,.0f} bytes a document ({keys_bytes / max(keys, 1):,.0f} "
                     f"a key); both {(store + keys_bytes) / docs:,.0f} bytes a document\n\n{table}", source_table]


def source_parts(client: Elasticsearch, index: str, sample: int = 2000) -> dict[str, float]:
    """Uncompressed JSON bytes per document of each part of ``_source`` (what the stored-fields share holds),
    over the first ``sample`` documents."""
    sizes: dict[str, int] = {}
    seen = 0
    for hit in helpers.scan(client, index=index, size=1000):
        source = dict(hit["_source"])
        zhdedup = source.pop("zhdedup", {})
        for name, value in [*source.items(), *((f"zhdedup.{k}", v) for k, v in zhdedup.items())]:
            key = "zhdedup.b*" if re.fullmatch(r"zhdedup\.b\d+", name) else name
            sizes[key] = sizes.get(key, 0) + len(json.dumps(value, ensure_ascii=False).encode())
        seen += 1
        if seen == sample:
            break
    return {name: n / seen for name, n in sorted(sizes.items(), key=lambda item: -item[1])}


def _kind(field: dict[str, Any], kind: str) -> int:
    value = field.get(f"{kind}_in_bytes", field.get(kind, 0))
    return int(value["total_in_bytes"] if isinstance(value, dict) else value)


# --- cpu ----------------------------------------------------------------------------------------------


class Timed:
    """Wall seconds and the CPU seconds of the child processes (``zhdedup`` and its workers) of ``run()``."""

    def __init__(self, run: Callable[[], Any]) -> None:
        before, started = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
        self.result = run()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.wall = time.perf_counter() - started
        self.cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def cpu(args: argparse.Namespace, client: Elasticsearch) -> tuple[dict[str, Any], list[str]]:
    """Per round: ``zhdedup scan`` of the same file (``--workers`` as ingest's); ``es ingest`` into a fresh
    index; ``helpers.bulk`` of what it stored into a fresh index with the same template, plainly (bulks of
    1000, one refresh at the end); and the same refreshed after every bulk of 500, as ingest writes
    (``refresh=true``, a batch of 1000 in two requests): what ingest's writes alone cost, so the rest is its
    lookups.  Wall time and the processes' own CPU (rusage) beside the node's: where ingest's time goes."""
    path = news_file() if args.news else scan_file(args.docs, DEFAULT_SEED, HTML_RATE)
    ingested, bulked = f"{PREFIX}-ingest", f"{PREFIX}-bulk"
    layout = BandLayout.from_config(DedupConfig())
    stored: list[dict[str, Any]] = []
    rounds = []
    for n in range(args.repeat):
        common.wait_until_quiet(client)
        scanned = Timed(lambda: run_cli(["scan", str(path), "-o", os.devnull, "--workers", str(args.workers)]))
        fresh_index(client, ingested)
        seconds, run = node_cpu_of(client, lambda: Timed(lambda: ingest(args.url, ingested, path, args.workers)))
        judged = run.result
        if not stored:  # exactly what ingest stored, as helpers.bulk's actions
            client.indices.refresh(index=ingested)
            stored = [{"_index": bulked, "_id": hit["_id"], "_source": hit["_source"]}
                      for hit in helpers.scan(client, index=ingested, size=1000)]
        row: dict[str, Any] = {"round": n + 1, "judged": judged, "ingest_cpu_s": seconds, "ingest_wall_s": run.wall,
                               "ingest_process_cpu_s": run.cpu, "scan_wall_s": scanned.wall,
                               "scan_process_cpu_s": scanned.cpu}
        for name, chunk, refresh in (("bulk", BULK, False), ("bulk_refreshed", BULK // 2, True)):
            fresh_index(client, bulked)
            install(client, bulked, layout)  # the same mapping and settings (the text field, words, no refresh timer)
            row[f"{name}_cpu_s"], timed = node_cpu_of(client, lambda c=chunk, r=refresh, a=stored: Timed(lambda: bulk(
                client, bulked, a, c, r)))
            row[f"{name}_docs"], row[f"{name}_wall_s"] = timed.result, timed.wall
        row.update(ingest_ms_doc=1000 * seconds / judged, bulk_ms_doc=1000 * row["bulk_cpu_s"] / row["bulk_docs"],
                   bulk_refreshed_ms_doc=1000 * row["bulk_refreshed_cpu_s"] / row["bulk_refreshed_docs"],
                   ingest_process_ms_doc=1000 * run.cpu / judged, scan_process_ms_doc=1000 * scanned.cpu / judged,
                   ingest_vs_scan=scanned.wall / run.wall, bulk_vs_scan=scanned.wall / row["bulk_wall_s"])
        row["ratio"] = row["ingest_ms_doc"] / row["bulk_ms_doc"]
        rounds.append(row)
        print(f"# {row}", file=sys.stderr, flush=True)
    for index in (ingested, bulked):
        fresh_index(client, index)
    table = common.table(["round", "es ingest node CPU ms/doc", "helpers.bulk ms/doc", "ratio",
                          "helpers.bulk, refreshed per 500, ms/doc"],
                         [(r["round"], r["ingest_ms_doc"], r["bulk_ms_doc"], f"{r['ratio']:.2f}x",
                           r["bulk_refreshed_ms_doc"]) for r in rounds])
    speed = common.table(["round", "scan s", "es ingest s", "ingest vs scan", "helpers.bulk s", "bulk vs scan",
                          "scan process CPU ms/doc", "ingest process CPU ms/doc", "ingest node CPU ms/doc"],
                         [(r["round"], r["scan_wall_s"], r["ingest_wall_s"], f"{r['ingest_vs_scan']:.2f}x",
                           r["bulk_wall_s"], f"{r['bulk_vs_scan']:.2f}x", r["scan_process_ms_doc"],
                           r["ingest_process_ms_doc"], r["ingest_ms_doc"]) for r in rounds])
    medians = {key: statistics.median(r[key] for r in rounds) for key in (
        "ratio", "ingest_vs_scan", "bulk_vs_scan", "scan_process_ms_doc", "ingest_process_ms_doc", "ingest_ms_doc")}
    return {"rounds": rounds, "median_ratio": medians.pop("ratio"), "medians": medians, "workers": args.workers,
            "corpus": "news" if args.news else "mixed"}, [table, speed]


def bulk(client: Elasticsearch, index: str, actions: list[dict[str, Any]], chunk: int, refresh: bool) -> int:
    count, errors = helpers.bulk(client, actions, chunk_size=chunk, stats_only=True, raise_on_error=False,
                                 refresh=refresh)
    if not refresh:
        client.indices.refresh(index=index)
    if errors:
        raise RuntimeError(f"helpers.bulk: {errors} documents refused")
    return int(count)


# --- shards -------------------------------------------------------------------------------------------


def shards(args: argparse.Namespace, client: Elasticsearch) -> tuple[dict[str, Any], list[str]]:
    dedup = DedupConfig()
    fingerprinter = Fingerprinter(dedup)
    real = real_articles(args.queries, fingerprinter)
    queries: list[tuple[str, Features]] = []
    for _, text in reposts(real):
        clean = fingerprinter.clean(text=text)
        queries.append((content_hash(clean), fingerprinter.features(clean)))
    counts = [int(n) for n in args.shards.split(",")]
    source = f"{PREFIX}-{args.docs}-s1"
    indices = {n: source if n == 1 else f"{PREFIX}-{args.docs}-s{n}" for n in counts}
    if not (args.reuse and all(client.indices.exists(index=i) for i in indices.values())):
        for index in indices.values():
            fresh_index(client, index)
        seconds = load(client, source, BandLayout.from_config(dedup), args.docs - len(real), real, sentence_pool(fingerprinter),
                       dedup.max_chars, seed=1, merge=True)
        print(f"# loaded {args.docs:,} documents in {seconds:.0f} s", file=sys.stderr, flush=True)
        client.indices.put_settings(index=[source, registry_name(source)], settings={"index.blocks.write": True})
        for n, index in indices.items():
            if index != source:
                split(client, source, index, n)
                split(client, registry_name(source), registry_name(index), n)  # the registry has as many
    rows: dict[int, list[dict[str, float]]] = {n: [] for n in counts}
    for _ in range(args.repeat):
        for n, index in indices.items():
            common.wait_until_quiet(client)
            rows[n].append(asyncio.run(measure(args.url, index, dedup, queries, args.batch, client)))
            print(f"# {n} shards: {rows[n][-1]}", file=sys.stderr, flush=True)
    if not args.keep:
        for index in indices.values():
            fresh_index(client, index)
    summary: dict[str, dict[str, Any]] = {str(n): {key: statistics.median(r[key] for r in rs) for key in rs[0]} | {"runs": rs}
               for n, rs in rows.items()}
    one = summary[str(counts[0])]
    table = common.table(
        ["shards", "node CPU ms/lookup", "vs 1 shard", "latency p50 ms", "p99 ms", "batch wall ms/lookup"],
        [(n, s["cpu_ms"], f"{s['cpu_ms'] / one['cpu_ms']:.2f}x", s["p50_ms"], s["p99_ms"], s["batch_wall_ms"])
         for n, s in ((n, summary[str(n)]) for n in counts)])
    return {"docs": args.docs, "queries": len(queries), "batch": args.batch, "shards": summary}, [table]


def split(client: Elasticsearch, source: str, target: str, shards: int) -> None:
    """``source`` (one shard, write-blocked) split into ``shards``, then merged to one segment per shard."""
    started = time.perf_counter()
    client.indices.split(index=source, target=target, settings={
        "index.number_of_shards": shards, "index.number_of_replicas": 0, "index.blocks.write": None})
    client.cluster.health(index=target, wait_for_status="green", timeout="600s")
    client.options(request_timeout=3600).indices.forcemerge(index=target, max_num_segments=1)
    print(f"# split {source} into {shards} shards in {time.perf_counter() - started:.0f} s", file=sys.stderr)


async def measure(url: str, index: str, dedup: DedupConfig, queries: Sequence[tuple[str, Features]], batch: int,
                  sync: Elasticsearch) -> dict[str, float]:
    """Latency of the lookups of one document at a time, then the node's CPU per document in batches."""
    client = AsyncElasticsearch(url, request_timeout=60)
    try:
        async def lookup(part: Sequence[tuple[str, Features]], lookups: EsLookups) -> None:
            await adrive(client, lookups.both([digest for digest, _ in part], [query_features(f) for _, f in part]))

        single = EsLookups(index, CandidateKeys.from_config(dedup), NearRule.from_config(dedup), RetryPolicy(), EsStats())
        await lookup(queries[:20], single)  # the node's caches and the client's connections
        latencies = []
        for query in queries:
            started = time.perf_counter()
            await lookup([query], single)
            latencies.append(1000 * (time.perf_counter() - started))
        batched = EsLookups(index, CandidateKeys.from_config(dedup), NearRule.from_config(dedup), RetryPolicy(), EsStats())
        before = common.node_cpu_ms(sync)
        started = time.perf_counter()
        for at in range(0, len(queries), batch):
            await lookup(queries[at : at + batch], batched)
        wall = time.perf_counter() - started
        await asyncio.sleep(1.1)  # a node caches its process statistics for a second
        cpu_ms = common.node_cpu_ms(sync) - before
    finally:
        await client.close()
    return {"cpu_ms": cpu_ms / len(queries), "p50_ms": percentile(latencies, 50), "p99_ms": percentile(latencies, 99),
            "batch_wall_ms": 1000 * wall / len(queries)}


def on_node(part: Callable[[argparse.Namespace, Elasticsearch], tuple[dict[str, Any], list[str]]]) \
        -> Callable[[argparse.Namespace], Result]:
    def run(args: argparse.Namespace) -> Result:
        return Result(*part(args, Elasticsearch(args.url, request_timeout=600)))
    return run


def disk_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--docs", type=positive, default=20_000, help="documents (default %(default)s)")
    parser.add_argument("--workers", type=positive, default=2, help="es ingest --workers (default %(default)s)")
    parser.add_argument("--keep", action="store_true", help="keep the index afterwards")


def cpu_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--docs", type=positive, default=3000, help="documents (default %(default)s)")
    parser.add_argument("--workers", type=positive, default=2, help="es ingest --workers (default %(default)s)")
    parser.add_argument("--repeat", type=positive, default=3, help="rounds, taking turns (default %(default)s)")
    parser.add_argument("--news", action="store_true", help="the throughput benchmark's news corpus (all of it) "
                        "instead of --docs documents of the mixed one")


def shards_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--docs", type=positive, default=1_000_000, help="documents (default %(default)s)")
    parser.add_argument("--shards", default="1,3,6", help="shard counts compared (default %(default)s)")
    parser.add_argument("--queries", type=positive, default=1000, help="reposts looked up (default %(default)s)")
    parser.add_argument("--batch", type=positive, default=16, help="documents per lookup batch (default %(default)s)")
    parser.add_argument("--repeat", type=positive, default=3, help="rounds, taking turns (default %(default)s)")
    parser.add_argument("--keep", action="store_true", help="keep the indices afterwards")
    parser.add_argument("--reuse", action="store_true", help="use the indices a --keep run left")


BENCHMARKS = (
    Benchmark("es_disk", "Index size: bytes per document by field (_disk_usage) after es ingest of the throughput "
              "corpus.\n\n" + __doc__, on_node(disk), disk_options, node="required"),
    Benchmark("es_ingest_cpu", "Node CPU per document of es ingest against helpers.bulk of the same documents.\n\n"
              + __doc__, on_node(cpu), cpu_options, node="required"),
    Benchmark("es_shards", "The near lookup's node CPU and latency on 1, 3 and 6 shards (one load, then _split)."
              "\n\n" + __doc__, on_node(shards), shards_options, node="required"),
)
