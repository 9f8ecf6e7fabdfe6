"""``zhdedup es replay DEAD_LETTER``: judge and store the documents of a dead-letter file again.

A document lands in the dead-letter file when it could not be judged (lookups failed) or could not
be stored (the bulk failed past its retries, a mapping conflict).  Replaying sends each one through
the same backend as ``es ingest`` and the Scrapy pipeline, in the file's order, so it is judged
against everything stored meanwhile (for a crawl item that is after the rest of the crawl: a repost
crawled later may then count as the first copy).  Documents whose id the index already holds (an
ingest rerun stored them) are skipped.

The mode is the one the lines were written in (a drop-mode crawl's replay stores no repeat), unless
``--mode`` says otherwise.  Items a crawl could not judge (stage ``lookup``) were not delivered: with
``--output FILE`` those replayed into the index are appended to FILE as JSON lines (in drop mode the
first copies; in annotate mode every one, with its verdict under the default ``ZHDEDUP_FIELDS``) and
marked delivered in the crawl's ledger beside the dead-letter file, so a re-crawl drops them as
delivered by an earlier run; without it they stay undelivered there, and a re-crawl delivers them.

The file is then rewritten atomically without the lines replayed: a second replay is a no-op.
Documents refused again are appended to the same file by the backend, so they stay for the next
replay; lines that cannot be judged (no text) stay as they are; lines for another index, and lines
other processes append meanwhile, are kept.  If the replay stops (the node goes down again), only
the lines whose document is now stored are dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
from collections import Counter
from pathlib import Path
from typing import Any

from elasticsearch import AsyncElasticsearch

from scrapy_zhdedup.config import DedupConfig, EsConfig, PipelineConfig
from scrapy_zhdedup.errors import BadRecordError, InputError
from scrapy_zhdedup.pipelines.delivery import DeliveryLedger
from scrapy_zhdedup.workers import PreparePool

from ..backend.deadletter import keep_only, read
from ..backend.elasticsearch_backend import ElasticsearchBackend, prepare_for_index
from ..backend.frozen import plain_search
from ..backend.retry import RetryPolicy
from ..backend.stats import EsStats
from ..client import make_async_client
from ..index.document import DOC_ID, SHOWN, Stored, item_fields
from ..operations import adrive
from ..privileges import REPLAY
from .checkpoint import Checkpoint
from .ingest import Item, Reader, prepare, skip_stored, store, stored_ids

logger = logging.getLogger(__name__)


def replay(path: Path, dedup: DedupConfig, es: EsConfig, *, mode: str | None = None, text_field: str = "text",
           html_field: str = "html", output: Path | None = None) -> dict[str, Any]:
    """Replay the dead letters of ``es.es_index`` in ``path`` in ``mode`` (None: the lines'); returns counts
    (``failed``: refused again, ``delivered``: items appended to ``output``)."""
    if not path.is_file():
        raise InputError(f"{path}: no such dead-letter file")
    return asyncio.run(_replay(path.absolute(), dedup, es, mode, text_field, html_field, output))


def _mode(records: list[dict[str, Any]], mine: list[int], asked: str | None) -> str:
    """The mode to judge in: the one asked for, else the one the lines were written in (annotate for lines
    of a version that did not record it)."""
    if asked is not None:
        return asked
    modes = {str(records[i].get("mode") or "annotate") for i in mine}
    if len(modes) > 1:
        raise InputError("the dead-letter lines were written by runs in both modes (drop and annotate): give "
                         "--mode, or replay them from separate files")
    return modes.pop() if modes else "annotate"


def _item(record: dict[str, Any], path: Path, line: int, text_field: str, html_field: str) -> Item:
    document = item_fields(record["document"])
    html = document.get(html_field)
    text = document.get(text_field)
    return Item(str(record["doc_id"]), text if isinstance(text, str) else None, document, str(path), line, line,
                html if isinstance(html, str) else None)


async def _replay(path: Path, dedup: DedupConfig, es: EsConfig, asked: str | None, text_field: str,
                  html_field: str, output: Path | None) -> dict[str, Any]:
    records, read_upto = read(path)
    mine = [i for i, r in enumerate(records)  # in file order
            if r.get("index") == es.es_index and r.get("doc_id") is not None and isinstance(r.get("document"), dict)]
    mode = _mode(records, mine, asked)
    undelivered = [i for i in mine if records[i].get("stage") == "lookup"]  # a crawl could not judge them
    es = dataclasses.replace(es, es_dead_letter=str(path))  # refused again: back into the same file
    client = make_async_client(es, caller_retries=True)
    backend = ElasticsearchBackend(dedup, es, index_duplicates=mode == "annotate", client=client, needs=REPLAY)
    counts: Counter[str] = Counter()
    errors: list[BadRecordError] = []
    reader = Reader(False, errors)
    items = iter([_item(records[i], path, i + 1, text_field, html_field) for i in mine])
    policy = RetryPolicy(es.es_max_retries, outage=backend.outage)
    finished = False
    delivered = 0
    try:
        await backend.open()
        with PreparePool(dedup, prepare_for_index, workers=1) as pool:  # a dead-letter file is short
            prepared = prepare(pool, items, backend.search.segments)
            async with contextlib.aclosing(skip_stored(prepared, client, es.es_index, es.es_bulk_size,
                                                       counts, policy)) as stream:
                await store(backend, stream, reader, Checkpoint(None, {}, {"position": 0, "done": False}), counts,
                            es.es_bulk_size, 1, None)
        finished = True
    finally:
        try:
            await backend.close()
        finally:
            bad = {error.line - 1 for error in errors}  # not judged: their lines stay for a look and a later replay
            done = (set(range(len(records))) - bad if finished
                    else await _now_stored(client, es.es_index, records, mine))
            replayed = done & set(mine)
            try:
                if output is not None and finished:
                    refused = {str(r.get("doc_id")) for r in read(path)[0][len(records):]}  # appended since
                    delivered = await _deliver(client, es.es_index, path, output, mode, [
                        records[i] for i in undelivered if i in replayed and str(records[i]["doc_id"]) not in refused],
                        policy)
                elif output is not None:  # stopped: their lines stay, for the replay that delivers them
                    replayed -= set(undelivered)
            finally:
                await client.close()
            keep_only(path, [r for i, r in enumerate(records) if i not in replayed], read_upto)
    return {"file": str(path), "index": es.es_index, "replayed": len(mine), "unique": counts["unique"],
            "exact": counts["exact"], "near": counts["near"], "already_stored": counts["already_stored"],
            "bad": len(errors), "failed": backend.dead_lettered, "other_lines": len(records) - len(mine),
            "mode": mode, "delivered": delivered, "output": None if output is None else str(output)}


async def _deliver(client: AsyncElasticsearch, index: str, path: Path, output: Path, mode: str,
                   replayed: list[dict[str, Any]], policy: RetryPolicy) -> int:
    """Append to ``output`` the replayed items the crawl's ledger (beside the dead-letter file) says were
    never delivered and the index now holds, then mark every one of those delivered there (a repeat
    dropped in drop mode counts, as a crawl's drop does; ``replayed`` leaves out those refused again,
    which stay undelivered for a re-crawl).  One a re-crawl delivered meanwhile is not in the ledger any
    more, so it is not delivered twice."""
    ledger = DeliveryLedger(path.parent, index)
    ledger.open()
    try:
        waiting = [r for r in replayed if str(r["doc_id"]) in ledger.undelivered]
        verdicts = await _verdicts(client, index, [str(r["doc_id"]) for r in waiting], policy)
        lines = _lines(waiting, verdicts, mode)
        output.parent.mkdir(parents=True, exist_ok=True)
        with output.open("a", encoding="utf-8") as fh:
            fh.writelines(lines)
            fh.flush()
            os.fsync(fh.fileno())
        for record in waiting:  # only once the file holds them
            ledger.done(str(record["doc_id"]))
    finally:
        ledger.close()
    return len(lines)


def _lines(records: list[dict[str, Any]], verdicts: dict[str, Stored], mode: str) -> list[str]:
    """The items the index holds, as JSON lines: their fields, and in annotate mode their verdict."""
    fields = PipelineConfig().fields
    lines = []
    for record in records:
        stored = verdicts.get(str(record["doc_id"]))
        if stored is None:
            continue
        item = item_fields(record["document"])
        if mode == "annotate":
            values = {"status": stored.status, "dup_of": stored.dup_of, "distance": stored.distance,
                      "cluster": stored.cluster}
            item |= {fields[key]: value for key, value in values.items() if key in fields}
        lines.append(json.dumps(item, ensure_ascii=False, default=str) + "\n")
    return lines


async def _verdicts(client: AsyncElasticsearch, index: str, ids: list[str], policy: RetryPolicy) -> dict[str, Stored]:
    """The stored object of each of ``ids`` the index holds."""
    if not ids:
        return {}
    resp = await adrive(client, policy.call(lambda c: c.search(
        index=index, size=2 * len(ids), query={"terms": {DOC_ID: ids}}, source_includes=SHOWN), EsStats()))
    found: dict[str, Stored] = {}
    for hit in resp["hits"]["hits"]:
        stored = Stored.from_source(hit["_source"])
        if stored is not None and (stored.doc_id not in found or stored.status == "unique"):
            found[stored.doc_id] = stored
    return found


async def _now_stored(client: AsyncElasticsearch, index: str, records: list[dict[str, Any]],
                      mine: list[int]) -> set[int]:
    try:
        held = await stored_ids(client, plain_search(index, RetryPolicy(), EsStats()),
                                [str(records[i]["doc_id"]) for i in mine])
    except Exception as exc:  # the node is why we stopped: keep every line for the next replay
        logger.warning("could not tell which replayed documents were stored (%s); the file keeps them all", exc)
        return set()
    return {i for i in mine if str(records[i]["doc_id"]) in held}
