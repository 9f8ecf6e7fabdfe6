"""``zhdedup es replay DEAD_LETTER``: judge and store the documents of a dead-letter file again.

A document lands in the dead-letter file when it could not be judged (lookups failed) or could not
be stored (the bulk failed past its retries, a mapping conflict).  Replaying sends each one through
the same backend as ``es ingest`` and the Scrapy pipeline, in the file's order, so it is judged
against everything stored meanwhile (for a crawl item that is after the rest of the crawl: a repost
crawled later may then count as the first copy).  Documents whose id the index already holds (an
ingest rerun stored them) are skipped.

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
import logging
from collections import Counter
from pathlib import Path
from typing import Any

from elasticsearch import AsyncElasticsearch

from scrapy_zhdedup.config import DedupConfig, EsConfig
from scrapy_zhdedup.errors import BadRecordError, InputError
from scrapy_zhdedup.workers import PreparePool

from ..client import make_async_client
from ..index.document import item_fields
from ..privileges import REPLAY
from ..store.backend import ElasticsearchBackend, prepare_for_index
from ..store.deadletter import keep_only, read
from ..store.retry import RetryPolicy
from .checkpoint import Checkpoint
from .ingest import Item, Reader, prepare, skip_stored, store, stored_ids

logger = logging.getLogger(__name__)


def replay(path: Path, dedup: DedupConfig, es: EsConfig, *, mode: str = "annotate", text_field: str = "text",
           html_field: str = "html") -> dict[str, Any]:
    """Replay the dead letters of ``es.es_index`` in ``path``; returns counts (``failed``: refused again)."""
    if not path.is_file():
        raise InputError(f"{path}: no such dead-letter file")
    return asyncio.run(_replay(path.absolute(), dedup, es, mode, text_field, html_field))


def _item(record: dict[str, Any], path: Path, line: int, text_field: str, html_field: str) -> Item:
    document = item_fields(record["document"])
    html = document.get(html_field)
    text = document.get(text_field)
    return Item(str(record["doc_id"]), text if isinstance(text, str) else None, document, str(path), line, line,
                html if isinstance(html, str) else None)


async def _replay(path: Path, dedup: DedupConfig, es: EsConfig, mode: str, text_field: str,
                  html_field: str) -> dict[str, Any]:
    records, read_upto = read(path)
    mine = [i for i, r in enumerate(records)  # in file order
            if r.get("index") == es.es_index and r.get("doc_id") is not None and isinstance(r.get("document"), dict)]
    es = dataclasses.replace(es, es_dead_letter=str(path))  # refused again: back into the same file
    client = make_async_client(es, caller_retries=True)
    backend = ElasticsearchBackend(dedup, es, index_duplicates=mode == "annotate", client=client,
                                   journal=False, needs=REPLAY)  # journal: its lines stay until stored
    counts: Counter[str] = Counter()
    errors: list[BadRecordError] = []
    reader = Reader(False, errors)
    items = iter([_item(records[i], path, i + 1, text_field, html_field) for i in mine])
    policy = RetryPolicy(es.es_max_retries)
    finished = False
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
            await client.close()
            replayed = done & set(mine)
            keep_only(path, [r for i, r in enumerate(records) if i not in replayed], read_upto)
    return {"file": str(path), "index": es.es_index, "replayed": len(mine), "unique": counts["unique"],
            "exact": counts["exact"], "near": counts["near"], "already_stored": counts["already_stored"],
            "bad": len(errors), "failed": backend.dead_lettered, "other_lines": len(records) - len(mine)}


async def _now_stored(client: AsyncElasticsearch, index: str, records: list[dict[str, Any]],
                      mine: list[int]) -> set[int]:
    try:
        held = await stored_ids(client, index, [str(records[i]["doc_id"]) for i in mine], RetryPolicy())
    except Exception as exc:  # the node is why we stopped: keep every line for the next replay
        logger.warning("could not tell which replayed documents were stored (%s); the file keeps them all", exc)
        return set()
    return {i for i in mine if str(records[i]["doc_id"]) in held}
