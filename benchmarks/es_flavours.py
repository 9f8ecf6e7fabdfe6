"""``es ingest`` and the crawl's backend on the node at ``--url``, whichever flavour it is (issue 41):
Elasticsearch 9, 8, 7.x or OpenSearch, each with its client (``es7`` / ``opensearch`` extras).

Per round, into a fresh index each: ``zhdedup es ingest`` of the corpus (a child process), then the
Scrapy pipeline's backend (``ElasticsearchBackend.judge`` per item, as the pipeline calls it, annotate
mode, in this process).  Measured: the node's CPU per judged document (``_nodes/stats``, from a quiet
node to a quiet node, as ``es_ingest_cpu``), and a digest of every document's verdict (status, dup_of)
read back from the index: the same digest on two flavours means the same verdicts for the same
documents.  Run it once per flavour, each with its virtualenv, and compare the rows (ratios to 9's CPU
in the README, from runs on one machine taken one after the other).

    .venv-es7/bin/python -m benchmarks es_flavours --url "$(ZHDEDUP_ES_VERSION=7.10 bash scripts/es-node.sh url)"
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import statistics
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks import common
from benchmarks.runner import Benchmark, Result, positive
from corpora.corpus import DEFAULT_SEED, scan_file
from es_plugin.backend.elasticsearch_backend import ElasticsearchBackend
from es_plugin.client import make_client
from es_plugin.commands.pointintime import PointInTime
from es_plugin.flavour import LegacyClient, detect, server_of
from es_plugin.operations import drive
from scrapy_zhdedup.config import DedupConfig, EsConfig

PREFIX = "zhdedup-bench-flavour"


def ingest(url: str, index: str, path: Path, workers: int) -> int:
    """``zhdedup es ingest`` into a fresh index; returns the documents it judged."""
    with tempfile.TemporaryDirectory() as tmp:
        out = common.run_cli(["es", "ingest", "--url", url, "--index", index, "--workers", str(workers), "--restart",
                              "--checkpoint-dir", f"{tmp}/ck", "--dead-letter", f"{tmp}/dead.jsonl", str(path)])[1]
    return int(out.split("zhdedup es ingest: ", 1)[1].split(" judged", 1)[0])


async def pipeline(url: str, index: str, records: list[dict[str, Any]]) -> int:
    """The pipeline's backend over ``records``, one item after the other as the pipeline hands them on."""
    with tempfile.TemporaryDirectory() as tmp:
        b = ElasticsearchBackend(DedupConfig(), EsConfig(es_url=url, es_index=index, es_dead_letter=f"{tmp}/dead.jsonl"),
                                 index_duplicates=True)
        try:
            await b.open()
            for r in records:
                await b.judge(r["id"], text=r.get("text"), html=r.get("html"), document={"url": r["id"]})
        finally:
            await b.close()
    return len(records)


def verdicts(client: Any, index: str) -> tuple[str, dict[str, int]]:
    """A digest of every document's (doc_id, status, dup_of), and the count of each status."""
    client.indices.refresh(index=index)
    rows = []
    with PointInTime(client, index) as reader:
        body = {"size": 1000, "_source": ["zhdedup.doc_id", "zhdedup.status", "zhdedup.dup_of"],
                "sort": [{"_shard_doc": "asc"}]}
        for page in reader.pages(body):
            rows += [(h["_id"], (h["_source"].get("zhdedup") or {}).get("status"),
                      (h["_source"].get("zhdedup") or {}).get("dup_of")) for h in page]
    rows.sort()
    digest = hashlib.sha256(json.dumps(rows).encode()).hexdigest()[:16]
    return digest, dict(Counter(str(r[1]) for r in rows))


def run(args: argparse.Namespace) -> Result:
    client = make_client(EsConfig(es_url=args.url, es_timeout=600))
    server = server_of(client) if isinstance(client, LegacyClient) else drive(client, detect(30))
    path = scan_file(args.docs, DEFAULT_SEED, args.html_rate)
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    rounds = []
    for n in range(args.repeat):
        row: dict[str, Any] = {"round": n + 1}
        for name, index, work in (
                ("ingest", f"{PREFIX}-ingest", lambda i: ingest(args.url, i, path, args.workers)),
                ("pipeline", f"{PREFIX}-pipeline", lambda i: asyncio.run(pipeline(args.url, i, records)))):
            common.fresh_index(client, index)
            common.wait_until_quiet(client)
            before = common.node_cpu_ms(client)
            judged = work(index)
            common.wait_until_quiet(client)
            row[f"{name}_ms_doc"] = (common.node_cpu_ms(client) - before) / judged
            row[f"{name}_digest"], row[f"{name}_statuses"] = verdicts(client, index)
            common.fresh_index(client, index)
        rounds.append(row)
        print(f"# {row}", file=sys.stderr, flush=True)
    table = common.table(["round", "es ingest node CPU ms/doc", "pipeline node CPU ms/doc", "ingest verdicts",
                          "pipeline verdicts"],
                         [(r["round"], r["ingest_ms_doc"], r["pipeline_ms_doc"], r["ingest_digest"],
                           r["pipeline_digest"]) for r in rounds])
    return Result({"server": str(server), "docs": args.docs, "rounds": rounds,
                   "median_ingest_ms_doc": statistics.median(r["ingest_ms_doc"] for r in rounds),
                   "median_pipeline_ms_doc": statistics.median(r["pipeline_ms_doc"] for r in rounds)},
                  [f"server: {server}", table])


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--docs", type=positive, default=2000, help="documents (default %(default)s)")
    parser.add_argument("--html-rate", type=float, default=0.1, help="share of HTML pages (default %(default)s)")
    parser.add_argument("--workers", type=positive, default=2, help="es ingest --workers (default %(default)s)")
    parser.add_argument("--repeat", type=positive, default=2, help="rounds (default %(default)s)")


BENCHMARKS = (
    Benchmark("es_flavours", "Node CPU per document and verdicts of es ingest and the pipeline on this node's "
              "flavour.\n\n" + __doc__, run, options, node="required"),
)
