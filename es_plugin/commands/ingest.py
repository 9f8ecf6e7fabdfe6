"""``zhdedup es ingest``: load JSONL files or directories of saved pages into an index, deduplicated.

Every document goes through :class:`~es_plugin.backend.elasticsearch_backend.ElasticsearchBackend`, the engine
the Scrapy pipeline uses, so an ingested corpus and a crawled one are judged alike.

Inputs:

* a JSONL file: one ``{"id": ..., "text"|"html": ...}`` per line, as for ``zhdedup scan``; the other
  keys become fields of the stored document;
* a directory: every ``*.html``/``*.htm``/``*.shtml``/``*.xhtml`` below it, in sorted order, with the
  relative path as id, bytes decoded like a browser would (GBK and Big5 included).

Documents are cleaned (HTML: main text extracted) and fingerprinted by ``workers`` processes
(workers.py) and judged here in input order, so the verdicts do not depend on ``workers``; the
backend stores the main text as the page wrote it (``--text-field``), never the raw HTML.

Resuming: one checkpoint file per (index, input) records how far the input was written (last line
number, or number of files), saved only after the backend's ``flush`` returned with every document
up to there acknowledged by Elasticsearch (or refused for good, e.g. a mapping conflict: those are in
the dead-letter file, for ``zhdedup es replay`` once fixed).  A rerun continues after it.  A file
is known by its size, mtime and first block too, so a replaced file of the same name is not skipped.

Failures: when Elasticsearch stops taking documents (the node down past the retries, the index
write-blocked), the run stops there, exits non-zero with the count, and the checkpoint stays before
the first document not acknowledged; those documents are in the dead-letter file as well.  Running
the same command again judges them again in input order, so the verdicts are those of an
uninterrupted run; ``zhdedup es replay`` of the dead-letter file then finds them stored.  Beyond that,
ids are looked up in the index one bulk's worth at a time before they are judged, and documents
already stored are skipped: a process killed hard between a bulk and its checkpoint, or an input
given again (``--restart``, overlapping files), never stores a document a second time as an "exact
repeat" of itself.  That costs one ``terms`` search per bulk, of a point in time opened when the input
starts (backend/frozen.py: a plain search would make the index refresh every second of the run), so the
ids skipped are those stored before it started.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import itertools
import logging
import re
import time
from collections import Counter, deque
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from elastic_transport import TransportError
from elasticsearch import ApiError, AsyncElasticsearch

from es_plugin.backend.elasticsearch_backend import ElasticsearchBackend, Indexable, IndexJob, prepare_for_index
from scrapy_zhdedup.config import DedupConfig, EsConfig
from scrapy_zhdedup.errors import BadRecordError, ConfigError, EmptyTextError, InputError
from scrapy_zhdedup.files.inputs import Damage, html_files, open_input, read_page, read_records
from scrapy_zhdedup.garbage_collector import COLLECTOR
from scrapy_zhdedup.model import Verdict
from scrapy_zhdedup.similarity.words import load_segmenter
from scrapy_zhdedup.workers import PreparePool

from ..backend.deadletter import DEFAULT_NAME
from ..backend.frozen import Search, frozen_view
from ..backend.groupcommit import DEFAULT_CONCURRENCY
from ..backend.retry import RetryPolicy
from ..backend.stats import EsStats
from ..client import make_async_client
from ..errors import CheckpointError, EsUnavailableError, IngestStopped
from ..index.chinese import SearchText
from ..index.document import DOC_ID
from ..operations import adrive
from ..privileges import INGEST
from .checkpoint import Checkpoint

logger = logging.getLogger(__name__)

DEFAULT_CHECKPOINT_DIR = Path(".zhdedup-checkpoints")
MAX_REPORTED_ERRORS = 50
IDENTITY_BLOCK = 1 << 16  # bytes of an input hashed into its checkpoint identity
CHECKPOINT_NAMES = {"index": "--index", "input": "the input", "kind": "the kind of input",
                    "file.size": "the input's size", "file.mtime_ns": "the input's modification time",
                    "file.head_sha1": "the hash of the input's first 64 KiB"}

Progress = Callable[[int], None]


@dataclass(frozen=True)
class Item:
    """One document to judge; ``position`` is what the checkpoint stores once it is written."""

    doc_id: str
    text: str | None
    document: dict[str, Any]
    path: str
    line: int
    position: int
    html: str | None = None  # judged instead of ``text`` when given (its main text, extracted)


class Prepping(NamedTuple):
    item: Item
    indexable: Indexable | Exception  # what preparing it gave (PreparePool.map)


def open_checkpoint(directory: Path, index: str, source: Path, kind: str, restart: bool) -> Checkpoint:
    """How far one input got into one index: ``position`` (JSONL: last line written; directory: number
    of files written), ``last`` (directory: relative path of the last file written) and ``done``."""
    key = hashlib.sha1(f"{index}\0{source}".encode()).hexdigest()[:16]
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", f"{index}--{source.name}")[:100]
    identity: dict[str, Any] = {"index": index, "input": str(source), "kind": kind}
    if kind == "jsonl":
        identity["file"] = file_identity(source)
    return Checkpoint.open(directory / f"{name}--{key}.json", identity,
                           {"position": 0, "last": None, "done": False}, restart=restart,
                           way_out="start over with --restart (documents the index holds already are skipped)",
                           named=lambda key: CHECKPOINT_NAMES.get(key, key))


class Reader:
    """Turns one input into items (their pages are extracted with the text, by the workers)."""

    def __init__(self, strict: bool, errors: list[BadRecordError]) -> None:
        self.strict = strict
        self.errors = errors
        self.damage = Damage()  # an input that cannot be read on: raised once what was read before is stored

    def bad(self, error: BadRecordError) -> None:
        if self.strict:
            raise error
        logger.warning("skipped %s", error)
        self.errors.append(error)

    def jsonl(self, source: Path, start: int) -> Iterator[Item]:
        with open_input(source) as fh:
            records = read_records(fh, str(source), strict=self.strict, start_line=start, errors=self.errors)
            for rec in self.damage.guard(records):
                document = {k: v for k, v in rec.data.items() if k != "html"}  # the backend stores the main text
                yield Item(rec.doc_id, rec.text, document, rec.path, rec.line, rec.line, rec.html)

    def html_dir(self, source: Path, files: list[Path], start: int) -> Iterator[Item]:
        for number, file in enumerate(files[start:], start=start + 1):
            try:
                rec = read_page(source, file)
            except BadRecordError as exc:
                self.bad(exc)
                continue
            yield Item(rec.doc_id, None, rec.data, rec.path, 0, number, rec.html)


def prepare(pool: PreparePool[IndexJob, Indexable], items: Iterator[Item], segments: bool) -> Iterator[Prepping]:
    """Each item with what preparing it gave (or the error), in order; html wins over text, as in
    ``zhdedup scan`` and the pipeline."""
    ours, theirs = itertools.tee(items)
    return map(Prepping, ours, pool.map(IndexJob(item.doc_id, item.text, item.html, segments) for item in theirs))


def file_identity(path: Path) -> dict[str, Any]:
    """What tells this file from another of the same name: size, mtime and a hash of its first block."""
    stat = path.stat()
    with path.open("rb") as fh:
        head = hashlib.sha1(fh.read(IDENTITY_BLOCK)).hexdigest()
    return {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "head_sha1": head}


def ingest(inputs: Sequence[Path], dedup: DedupConfig, es: EsConfig, *, mode: str = "annotate",
           checkpoint_dir: Path = DEFAULT_CHECKPOINT_DIR, restart: bool = False, strict: bool = False,
           concurrency: int = DEFAULT_CONCURRENCY, workers: int | None = None,
           progress: Progress | None = None) -> dict[str, Any]:
    """Ingest ``inputs`` into ``es.es_index``; returns counts per input and in total.

    ``mode="annotate"`` stores duplicates too (with their verdict, for folded search), ``"drop"``
    stores first copies only.  Up to ``concurrency`` documents are looked up in one request; a request
    starts once the documents before it were decided, so the verdicts are those of judging one at a
    time in input order, whatever ``concurrency``.  ``workers`` processes prepare the documents
    (default: the machine's cores); the verdicts do not depend on their number either.
    ``progress(n)`` is called with the number of documents just judged.
    """
    if mode not in ("annotate", "drop"):
        raise ConfigError(f"mode must be 'annotate' or 'drop', not {mode!r}")
    if concurrency < 1:
        raise ConfigError("concurrency must be at least 1")
    kinds = []
    for source in inputs:
        if str(source) == "-":
            raise InputError("es ingest resumes from checkpoints, so it reads inputs it can read again: save "
                             "standard input to a file (a .gz file is fine) and ingest that")
        if source.is_dir():
            kinds.append("html")
        elif source.is_file():
            kinds.append("jsonl")
        else:
            raise InputError(f"{source}: no such file or directory")
    # first, before the event loop, its threads and connections exist: the workers are forked
    opened = time.perf_counter()
    if SearchText(es.es_text_field, es.es_analysis).segments:
        load_segmenter()  # for the words field, in this process before the fork: the workers share it
    with PreparePool(dedup, prepare_for_index, workers, fork=True, text="written") as pool:
        start_up = time.perf_counter() - opened
        with COLLECTOR.holding():  # the run's garbage collector (garbage_collector.py)
            report = asyncio.run(_ingest(list(zip(inputs, kinds)), dedup, es, mode, checkpoint_dir, restart, strict,
                                         concurrency, pool, progress))
    return {**report, "start_up_seconds": round(start_up, 2)}


async def _ingest(sources: list[tuple[Path, str]], dedup: DedupConfig, es: EsConfig, mode: str,
                  checkpoint_dir: Path, restart: bool, strict: bool, concurrency: int,
                  pool: PreparePool[IndexJob, Indexable], progress: Progress | None) -> dict[str, Any]:
    if not es.es_dead_letter:  # beside the checkpoints: both say what this run did not finish
        es = dataclasses.replace(es, es_dead_letter=str(checkpoint_dir / DEFAULT_NAME))
    client = make_async_client(es, caller_retries=True)  # the backend retries with its own backoff
    backend = ElasticsearchBackend(dedup, es, index_duplicates=mode == "annotate", client=client, in_order=True,
                                   needs=INGEST)
    errors: list[BadRecordError] = []
    reader = Reader(strict, errors)
    reports = []
    started = time.perf_counter()
    try:
        await backend.open()
        for source, kind in sources:
            state = open_checkpoint(checkpoint_dir, es.es_index, source.resolve(), kind, restart)
            reports.append(await _ingest_one(backend, client, reader, pool, source, state, es, concurrency,
                                             progress))
    except (EsUnavailableError, TransportError, ApiError) as exc:
        if not backend.dead_lettered:
            raise  # nothing judged since the checkpoint is lost: the checkpoint says where to go on
        raise IngestStopped(f"{exc}. {_stopped(backend)}") from exc
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
        "dead_lettered": backend.dead_lettered,
        "dead_letter_file": str(backend.dead_letter_path) if backend.dead_lettered else None,
        "replay": backend.replay_hint() if backend.dead_lettered else None,
        "seconds": round(seconds, 2), "docs_per_s": round(judged / seconds, 1) if seconds else 0.0,
    }


async def _ingest_one(backend: ElasticsearchBackend, client: AsyncElasticsearch, reader: Reader,
                      pool: PreparePool[IndexJob, Indexable], source: Path, state: Checkpoint, es: EsConfig,
                      concurrency: int, progress: Progress | None) -> dict[str, Any]:
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
            raise CheckpointError(f"{source}: the directory changed since checkpoint {state.path} "
                                  f"(file {at['position']} is no longer {at['last']!r}); use --restart")
        items = reader.html_dir(source, files, at["position"])
    else:
        items = reader.jsonl(source, at["position"])
    policy = RetryPolicy(es.es_max_retries, outage=backend.outage)  # waits out an outage with the backend's
    prepared = prepare(pool, items, backend.search.segments)
    async with contextlib.aclosing(skip_stored(prepared, client, es.es_index, es.es_bulk_size, counts, policy)) as stream:
        await store(backend, stream, reader, state, counts, es.es_bulk_size, concurrency, progress)
    return {**report, **counts, "done": True}


async def store(backend: ElasticsearchBackend, items: AsyncIterator[Prepping], reader: Reader, state: Checkpoint,
                counts: Counter[str], bulk_size: int, concurrency: int, progress: Progress | None) -> None:
    """Judge and write ``items`` in order; ``state`` moves only over documents Elasticsearch acknowledged."""
    at = state.progress
    in_flight: deque[tuple[Item, asyncio.Future[Verdict]]] = deque()
    since_flush = 0

    async def settle() -> None:
        """Take the oldest judgement: positions are checkpointed in input order whatever finishes first."""
        nonlocal since_flush
        item, future = in_flight.popleft()
        try:
            verdict = await future
        except (EmptyTextError, ValueError) as exc:
            reader.bad(BadRecordError.unjudged(item.path, item.line, exc))
        else:
            counts[verdict.status] += 1
        at.update(position=item.position, last=item.doc_id)
        since_flush += 1
        if progress is not None:
            progress(1)
        if since_flush >= bulk_size:
            await _commit(backend, state)
            since_flush = 0

    try:
        async for prepping in items:
            in_flight.append((prepping.item, asyncio.ensure_future(_judge(backend, prepping.item, prepping.indexable))))
            if len(in_flight) >= concurrency:
                await settle()
        while in_flight:
            await settle()
        reader.damage.check()  # a damaged input: what was read before it is stored and checkpointed below
        at["done"] = True
        await _commit(backend, state)
    except BaseException:
        for _, future in in_flight:
            future.cancel()
        await asyncio.gather(*(f for _, f in in_flight), return_exceptions=True)
        at["done"] = False
        try:  # keep what was judged before the interruption, so a rerun does not redo it
            await _commit(backend, state)
        except IngestStopped:
            pass  # the checkpoint stays behind; the error on its way says why
        except Exception as exc:  # Elasticsearch may be why we stopped; the checkpoint stays behind
            kept = f"; the checkpoint stays at {state.saved['position']}" if state.path is not None else ""
            logger.warning("%s: could not flush after the interruption (%s)%s", state.identity.get("input"), exc, kept)
        raise


async def _judge(backend: ElasticsearchBackend, item: Item, indexable: Indexable | Exception) -> Verdict:
    if isinstance(indexable, Exception):  # EmptyTextError, or a text no store can keep: a bad line
        raise indexable
    return await backend.judge_prepared(indexable.prepared, item.document, indexable.words)


async def _commit(backend: ElasticsearchBackend, state: Checkpoint) -> None:
    """Write what is buffered, then checkpoint, unless Elasticsearch stopped taking documents: then stop."""
    await backend.flush()
    if backend.dead_letters.retryable:
        raise IngestStopped(_stopped(backend))
    state.save()


def _stopped(backend: ElasticsearchBackend) -> str:
    return (f"Elasticsearch at {backend.url} did not take every document: {backend.dead_lettered} documents are "
            f"in the dead-letter file {backend.dead_letter_path}, and the checkpoint stays before the first one "
            f"not stored. Run the same command again once the index takes writes (what is stored is skipped), "
            f"or store just those with: {backend.replay_hint()}")


async def skip_stored(items: Iterator[Prepping], client: AsyncElasticsearch, index: str, window: int,
                      counts: Counter[str], policy: RetryPolicy) -> AsyncGenerator[Prepping, None]:
    """Items whose id the index does not hold yet, looked up ``window`` at a time (retried like every lookup).

    ``items`` is read on a thread, one window ahead of the one being judged: reading and waiting for
    the worker processes overlap judging and the event loop stays free for the bulk writes.
    """
    await adrive(client, policy.call(lambda c: c.indices.refresh(index=index, ignore_unavailable=True),
                                     EsStats()))  # a killed run's last bulk
    view = frozen_view(client, index, policy)  # searched without making the index refresh every second
    await adrive(client, view.open())

    def take() -> list[Prepping]:
        return list(itertools.islice(items, window))

    ahead = asyncio.ensure_future(asyncio.to_thread(take))
    try:
        while head := await ahead:
            ahead = asyncio.ensure_future(asyncio.to_thread(take))
            stored = await stored_ids(client, view.search, [prepping.item.doc_id for prepping in head])
            for prepping in head:
                if prepping.item.doc_id in stored:
                    counts["already_stored"] += 1
                else:
                    yield prepping
    finally:  # the thread cannot be cancelled: let it finish before the pool or the input closes
        await asyncio.gather(ahead, return_exceptions=True)
        await adrive(client, view.close())


async def stored_ids(client: AsyncElasticsearch, search: Search, ids: list[str]) -> set[str]:
    """Which of ``ids`` the index holds (one ``terms`` aggregation of those documents) in what ``search``
    reads: ``es ingest`` a view of the index when the run began."""
    unique = list(dict.fromkeys(ids))
    resp = await adrive(client, search({"size": 0, "query": {"terms": {DOC_ID: unique}}, "aggs": {
        "stored": {"terms": {"field": DOC_ID, "size": max(1, len(unique))}}}}))
    return {b["key"] for b in resp.get("aggregations", {}).get("stored", {}).get("buckets", [])}
