"""``zhdedup es ingest``: load JSONL files or directories of saved pages into an index, deduplicated.

Every document goes through :class:`~es_plugin.backend.ElasticsearchBackend`, the engine
the Scrapy pipeline uses, so an ingested corpus and a crawled one are judged alike.

Inputs:

* a JSONL file: one ``{"id": ..., "text"|"html": ...}`` per line, as for ``zhdedup scan``; the other
  keys become fields of the stored document;
* a directory: every ``*.html``/``*.htm``/``*.shtml``/``*.xhtml`` below it, in sorted order, with the
  relative path as id, bytes decoded like a browser would (GBK and Big5 included).

For HTML the main text is extracted once, by the worker pool, and judged (the engine would extract
the same text from the page again); the backend stores the cleaned text (``--text-field``), never
the raw HTML.

Resuming: one checkpoint file per (index, input) records how far the input was written (last line
number, or number of files), saved only after the backend's ``flush`` returned, i.e. after
Elasticsearch acknowledged every document up to there.  A rerun continues after it.  Beyond that,
ids are looked up in the index one bulk's worth at a time before they are judged, and documents
already stored are skipped: a process killed hard between a bulk and its checkpoint, or an input
given again (``--restart``, overlapping files), never stores a document a second time as an "exact
repeat" of itself.  That costs one ``terms`` search per bulk.
"""

from __future__ import annotations

import asyncio
import hashlib
import html as htmllib
import itertools
import logging
import re
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elasticsearch import AsyncElasticsearch

from es_plugin.backend import ElasticsearchBackend
from scrapy_zhdedup.config import DedupConfig, EsConfig
from scrapy_zhdedup.engine import Fingerprinter
from scrapy_zhdedup.errors import ConfigError, EmptyTextError, ZhDedupError
from scrapy_zhdedup.jsonl import BadRecordError, open_input, read_records
from scrapy_zhdedup.judge import Prepared
from scrapy_zhdedup.text import decode_html
from scrapy_zhdedup.workers import PreparePool

from .checkpoint import Checkpoint
from .client import acheck_reachable, make_async_client

logger = logging.getLogger(__name__)

HTML_SUFFIXES = (".html", ".htm", ".shtml", ".xhtml")
DEFAULT_CHECKPOINT_DIR = Path(".zhdedup-checkpoints")
MAX_REPORTED_ERRORS = 50
LOOKUP_BATCH = 100  # documents judged with one mget and one _msearch
_TITLE = re.compile(r"<title[^>]*>(.*?)</title>", re.I | re.S)

Progress = Callable[[int], None]
ItemJob = tuple[str, str | None, str | None]  # doc_id, text, html: what the worker pool prepares


@dataclass(frozen=True)
class Item:
    """One document to judge; ``position`` is what the checkpoint stores once it is written."""

    doc_id: str
    text: str | None
    document: dict[str, Any]
    path: str
    line: int
    position: int
    html: str | None = None  # its main text is extracted by the worker pool and judged


def open_checkpoint(directory: Path, index: str, source: Path, kind: str, restart: bool) -> Checkpoint:
    """How far one input got into one index: ``position`` (JSONL: last line written; directory: number
    of files written), ``last`` (directory: relative path of the last file written) and ``done``."""
    key = hashlib.sha1(f"{index}\0{source}".encode()).hexdigest()[:16]
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", f"{index}--{source.name}")[:100]
    return Checkpoint.open(directory / f"{name}--{key}.json", {"index": index, "input": str(source), "kind": kind},
                           {"position": 0, "last": None, "done": False}, restart=restart,
                           way_out="delete it or use --restart")


@dataclass
class _Stats:
    """What the backend counts (``inc_value`` like Scrapy's stats collector)."""

    values: Counter[str] = field(default_factory=Counter)

    def inc_value(self, key: str, count: int = 1, start: int = 0) -> None:
        self.values[key] += count


class _Reader:
    """Turns one input into items (the worker pool extracts the main text of pages)."""

    def __init__(self, strict: bool, errors: list[BadRecordError]) -> None:
        self.strict = strict
        self.errors = errors

    def bad(self, path: str, line: int, reason: str) -> None:
        error = BadRecordError(path, line, reason)
        if self.strict:
            raise error
        logger.warning("skipped %s", error)
        self.errors.append(error)

    def jsonl(self, source: Path, start: int) -> Iterator[Item]:
        with open_input(source) as fh:
            for rec in read_records(fh, str(source), strict=self.strict, start_line=start, errors=self.errors):
                document = {k: v for k, v in rec.data.items() if k != "html"}  # the backend stores the clean text
                # html wins over text, as in `zhdedup scan` and the pipeline
                yield Item(rec.doc_id, rec.text, document, rec.path, rec.line, rec.line, rec.html)

    def html_dir(self, source: Path, files: list[Path], start: int) -> Iterator[Item]:
        for number, file in enumerate(files[start:], start=start + 1):
            rel = file.relative_to(source).as_posix()
            try:
                page = decode_html(file.read_bytes())
            except OSError as exc:
                self.bad(str(file), 0, f"unreadable ({exc.strerror})")
                continue
            title = _TITLE.search(page)
            document = {"id": rel, "path": rel}
            if title:
                document["title"] = htmllib.unescape(title.group(1)).strip()
            yield Item(rel, None, document, str(file), 0, number, page)


def html_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.rglob("*") if p.suffix.lower() in HTML_SUFFIXES and p.is_file())


def ingest(inputs: Sequence[Path], dedup: DedupConfig, es: EsConfig, *, mode: str = "annotate",
           checkpoint_dir: Path = DEFAULT_CHECKPOINT_DIR, restart: bool = False, strict: bool = False,
           workers: int | None = None, progress: Progress | None = None) -> dict[str, Any]:
    """Ingest ``inputs`` into ``es.es_index``; returns counts per input and in total.

    ``mode="annotate"`` stores duplicates too (with their verdict, for folded search), ``"drop"``
    stores first copies only.  Documents are cleaned and fingerprinted by ``workers`` processes
    (default: the machine's cores; workers.py) and judged in input order, ``LOOKUP_BATCH`` at a time
    (at most a bulk) with one ``mget`` and one ``_msearch``: the verdicts are those of judging one at
    a time.
    ``progress(n)`` is called with the number of documents just judged.
    """
    if mode not in ("annotate", "drop"):
        raise ConfigError(f"mode must be 'annotate' or 'drop', not {mode!r}")
    kinds = []
    for source in inputs:
        if source.is_dir():
            kinds.append("html")
        elif source.is_file():
            kinds.append("jsonl")
        else:
            raise ZhDedupError(f"{source}: no such file or directory")
    with PreparePool(dedup, _prepare_item, workers) as pool:
        return asyncio.run(_ingest(list(zip(inputs, kinds)), dedup, es, mode, checkpoint_dir, restart, strict,
                                   pool, progress))


async def _ingest(sources: list[tuple[Path, str]], dedup: DedupConfig, es: EsConfig, mode: str,
                  checkpoint_dir: Path, restart: bool, strict: bool, pool: PreparePool[ItemJob, Prepared],
                  progress: Progress | None) -> dict[str, Any]:
    client = make_async_client(es, max_retries=0)  # the backend retries with its own backoff
    stats = _Stats()
    backend = ElasticsearchBackend(dedup, es, stats=stats, index_duplicates=mode == "annotate", client=client)
    errors: list[BadRecordError] = []
    reader = _Reader(strict, errors)
    reports = []
    started = time.perf_counter()
    try:
        await acheck_reachable(client, es.es_url)
        for source, kind in sources:
            state = open_checkpoint(checkpoint_dir, es.es_index, source.resolve(), kind, restart)
            reports.append(await _ingest_one(backend, client, reader, source, state, es, pool, progress))
    finally:
        try:
            await backend.close()
        finally:
            await client.close()
    seconds = time.perf_counter() - started
    totals: Counter[str] = Counter()
    for report in reports:
        totals.update({k: v for k, v in report.items() if isinstance(v, int) and not isinstance(v, bool)})
    judged = totals["unique"] + totals["exact"] + totals["near"]
    return {
        "index": es.es_index, "mode": mode, "inputs": reports,
        "judged": judged, "unique": totals["unique"], "exact": totals["exact"], "near": totals["near"],
        "already_stored": totals["already_stored"], "bad": len(errors),
        "bad_examples": [str(e) for e in errors[:MAX_REPORTED_ERRORS]],
        "dead_lettered": stats.values["zhdedup/es/dead_letter"],
        "dead_letter_file": str(backend.dead_letter_path) if stats.values["zhdedup/es/dead_letter"] else None,
        "seconds": round(seconds, 2), "docs_per_s": round(judged / seconds, 1) if seconds else 0.0,
    }


async def _ingest_one(backend: ElasticsearchBackend, client: AsyncElasticsearch, reader: _Reader, source: Path,
                      state: Checkpoint, es: EsConfig, pool: PreparePool[ItemJob, Prepared],
                      progress: Progress | None) -> dict[str, Any]:
    counts: Counter[str] = Counter()
    kind, at = state.identity["kind"], state.progress
    report: dict[str, Any] = {"input": str(source), "kind": kind, "resumed_from": at["position"],
                              "checkpoint": str(state.path)}
    if at["done"]:
        logger.info("%s: already ingested into %s (checkpoint %s)", source, es.es_index, state.path)
        return {**report, "done": True, "skipped_input": True}
    if kind == "html":
        files = html_files(source)
        if at["position"] and (at["position"] > len(files)
                                 or files[at["position"] - 1].relative_to(source).as_posix() != at["last"]):
            raise ZhDedupError(f"{source}: the directory changed since checkpoint {state.path} "
                               f"(file {at['position']} is no longer {at['last']!r}); use --restart")
        items = reader.html_dir(source, files, at["position"])
    else:
        items = reader.jsonl(source, at["position"])
    stream = _skip_stored(items, client, es.es_index, es.es_bulk_size, counts)
    since_flush = 0
    judging: tuple[list[Item], asyncio.Future[list[Prepared | Exception]]] | None = None

    async def judge_batch(batch: list[Item], results: list[Prepared | Exception]) -> None:
        """Judge one batch in input order; the checkpoint moves after each bulk's worth of batches."""
        nonlocal since_flush
        entries = [(p, item.document) for item, p in zip(batch, results) if isinstance(p, Prepared)]
        outcomes = iter(await backend.judge_many(entries))
        for item, result in zip(batch, results):
            outcome = next(outcomes) if not isinstance(result, Exception) else result
            if isinstance(outcome, (EmptyTextError, ValueError)):
                reader.bad(item.path, item.line, str(outcome))
            elif isinstance(outcome, Exception):
                raise outcome
            else:
                counts[outcome.status] += 1
            at.update(position=item.position, last=item.doc_id)
        since_flush += len(batch)
        if progress is not None:
            progress(len(batch))
        if since_flush >= es.es_bulk_size:
            await backend.flush()
            state.save()
            since_flush = 0

    try:
        # batch k+1 is prepared (worker processes) while batch k is looked up and judged
        async for batch in _batches(stream, min(LOOKUP_BATCH, es.es_bulk_size)):
            preparing = asyncio.ensure_future(asyncio.to_thread(
                lambda b=batch: list(pool.map((i.doc_id, i.text, i.html) for i in b))))  # type: ignore[misc]
            previous, judging = judging, (batch, preparing)  # on error, ``judging`` is what to cancel
            if previous is not None:
                await judge_batch(previous[0], await previous[1])
        if judging is not None:
            last, judging = judging, None
            await judge_batch(last[0], await last[1])
        await backend.flush()
        at["done"] = True
        state.save()
    except BaseException:
        if judging is not None:
            judging[1].cancel()
            await asyncio.gather(judging[1], return_exceptions=True)
        try:  # keep what was judged before the interruption, so a rerun does not redo it
            await backend.flush()
            state.save()
        except Exception as exc:  # Elasticsearch may be why we stopped; the checkpoint stays behind
            logger.warning("%s: could not flush after the interruption (%s); the checkpoint stays at %d",
                           source, exc, at["position"])
        raise
    return {**report, **counts, "done": True}


def _prepare_item(fingerprinter: Fingerprinter, job: ItemJob) -> Prepared:
    """The pool's step: a page's main text, then the document prepared from it with its features, also
    with one worker (then they are computed on the preparing thread while the previous batch is looked
    up, not on the event loop's critical path)."""
    doc_id, text, html = job
    if html is not None:
        text = fingerprinter.cleaner.extract(html)
    prepared = fingerprinter.prepare(doc_id, text=text or "")
    prepared.features  # noqa: B018 - a cached property, evaluated for its side effect
    return prepared


async def _batches(items: AsyncIterator[Item], size: int) -> AsyncIterator[list[Item]]:
    batch: list[Item] = []
    async for item in items:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


async def _skip_stored(items: Iterator[Item], client: AsyncElasticsearch, index: str, window: int,
                       counts: Counter[str]) -> AsyncIterator[Item]:
    """Items whose id the index does not hold yet, looked up ``window`` at a time."""
    await client.indices.refresh(index=index, ignore_unavailable=True)  # a killed run's last bulk
    while True:
        head = list(itertools.islice(items, window))
        if not head:
            return
        ids = list({i.doc_id for i in head})
        resp = await client.search(index=index, size=0, ignore_unavailable=True, aggs={
            "stored": {"terms": {"field": "zhdedup.doc_id", "include": ids, "size": len(ids)}}})
        stored = {b["key"] for b in resp.get("aggregations", {}).get("stored", {}).get("buckets", [])}
        for item in head:
            if item.doc_id in stored:
                counts["already_stored"] += 1
            else:
                yield item
