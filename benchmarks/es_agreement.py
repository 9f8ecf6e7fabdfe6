"""Do the Elasticsearch backend and the embedded store reach the same verdicts on the recall sets?

Both judge every document of the ``recall`` benchmark's sets (synthetic and natural, four corpora) one at a
time in arrival order: the embedded store through :class:`~scrapy_zhdedup.Deduper`, Elasticsearch
through :class:`~es_plugin.backend.elasticsearch_backend.ElasticsearchBackend` in annotate mode (every document stored with
its verdict, as the embedded store remembers every document), each set in a fresh index.  A verdict
differs when its status, ``dup_of`` or similarity does.  The tests check agreement on small streams;
this is the same question on the sets where clusters are large and keys common.

    python -m benchmarks es_agreement --url "$(bash scripts/es-node.sh url)" [--corpus clauses]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Sequence
from typing import Any

from elasticsearch import Elasticsearch

from benchmarks import common
from benchmarks.runner import Benchmark, Result, corpus_option, positive
from corpora import recall_sets
from corpora.recall_sets import build_sets
from es_plugin.backend.elasticsearch_backend import ElasticsearchBackend
from scrapy_zhdedup import DedupConfig, Deduper
from scrapy_zhdedup.config import EsConfig
from scrapy_zhdedup.errors import EmptyTextError
from scrapy_zhdedup.model import Verdict

INDEX_PREFIX = "bench-agreement"
Outcome = tuple[str, str | None, float | None] | None  # status, dup_of, similarity; None: no text


def outcome(verdict: Verdict) -> Outcome:
    return verdict.status, verdict.dup_of, verdict.similarity


def embedded(docs: Sequence[recall_sets.Doc]) -> list[Outcome]:
    deduper, out = Deduper(DedupConfig()), []
    for doc in docs:
        try:
            out.append(outcome(deduper.judge(doc.id, text=doc.text)))
        except EmptyTextError:
            out.append(None)
    return out


async def on_elasticsearch(url: str, index: str, docs: Sequence[recall_sets.Doc]) -> list[Outcome]:
    es = EsConfig(es_url=url, es_index=index, es_dead_letter=f"/tmp/{index}-dead-letter.jsonl")
    backend, out = ElasticsearchBackend(DedupConfig(), es, index_duplicates=True), []
    try:
        for doc in docs:
            try:
                out.append(outcome(await backend.judge(doc.id, text=doc.text, html=None, document={"id": doc.id})))
            except EmptyTextError:
                out.append(None)
    finally:
        await backend.close()
    return out


def compare(url: str, client: Elasticsearch, corpus: str, set_name: str,
            docs: Sequence[recall_sets.Doc]) -> dict[str, Any]:
    index = f"{INDEX_PREFIX}-{corpus}-{set_name}"
    client.options(ignore_status=404).indices.delete(index=index)
    expected = embedded(docs)
    started = time.perf_counter()
    got = asyncio.run(on_elasticsearch(url, index, docs))
    seconds = time.perf_counter() - started
    client.options(ignore_status=404).indices.delete(index=index)
    differ = [(doc.id, e, g) for doc, e, g in zip(docs, expected, got) if e != g]
    status = [d for d in differ if (d[1] or ("",))[0] != (d[2] or ("",))[0]]
    row = {"corpus": corpus, "set": set_name, "documents": len(docs), "differ": len(differ),
           "status_differs": len(status), "es_seconds": round(seconds, 1),
           "examples": [{"doc": i, "embedded": e, "elasticsearch": g}
                        for i, e, g in (status + [d for d in differ if d not in status])[:10]]}
    print(f"  {corpus}/{set_name}: {len(docs):,} documents, {len(differ)} verdicts differ "
          f"({len(status)} in status)", flush=True)
    return row


def run(args: argparse.Namespace) -> Result:
    client = Elasticsearch(args.url, request_timeout=120)
    rows = []
    for corpus in args.corpus:
        for set_name, (docs, _) in build_sets(corpus, args.n_base, 60, recall_sets.SEED).items():
            rows.append(compare(args.url, client, corpus, set_name, docs))
    table = common.table(["corpus", "set", "documents", "verdicts that differ", "of which in status"],
                         [[r["corpus"], r["set"], f"{r['documents']:,}", r["differ"], r["status_differs"]]
                          for r in rows])
    for r in rows:
        for example in r["examples"]:
            print(f"  {r['corpus']}/{r['set']} {example}", file=sys.stderr)
    return Result(rows, [table])


def options(parser: argparse.ArgumentParser) -> None:
    corpus_option(parser)
    parser.add_argument("--n-base", type=positive, default=600, help="synthetic originals per corpus (as recall)")


BENCHMARKS = (Benchmark("es_agreement", __doc__, run, options, node="required"),)
