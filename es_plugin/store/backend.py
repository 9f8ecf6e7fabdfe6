"""Elasticsearch as the shared store: ``ZHDEDUP_BACKEND = "elasticsearch"``.

Several crawler processes can judge against one index.  Items are judged in batches (the pipeline's
items that arrive within ``ZHDEDUP_ES_BATCH_WINDOW``, groupcommit.py; ``es ingest``'s input in order):

1. clean and hash (worker thread or worker processes); a local Bloom filter of hashes seen here says
   whether the fingerprint is likely needed (if not, the exact lookup answers alone; else both at once);
2. the lookups (lookups.py), for the whole batch: one realtime ``mget`` of ``_id = content hash`` and
   one ``_msearch`` of near searches;
3. :func:`~scrapy_zhdedup.judge.judge` on :class:`~es_plugin.store.lookups.EsAnswers`, item by item in
   order: those answers plus the documents this process buffered that searches cannot see yet, the
   batch's earlier items included; the verdict's document goes into the bulk buffer (duplicates only
   in annotate mode), written by writer.py.

First copies are written with ``op_type=create`` under their hash, so two writers storing the same
text race on one ``_id`` and the loser gets a 409: that is how exact repeats are caught across
processes even inside the window where neither has flushed.

What a judgement sees of the documents not yet visible to searches, and when they become
visible: buffer.py.

Judging and enqueueing is synchronous (``judge`` has no ``await``): the event loop runs it
atomically, so two concurrent near-duplicates cannot both be judged unique — the guarantee of a
lock, enforced by the function's type instead of by discipline.

Failures: transient errors are retried by the one policy (retry.py).  Documents ES rejects for good go to
a dead-letter JSONL file with the reason (deadletter.py; ``zhdedup es replay`` stores them later); an
item whose lookup cannot be done is written there too and its ``judge`` raises
:class:`LookupFailedError`, so nothing is lost quietly.  The file is checked at :meth:`open`; if it
still cannot be written, the writer stops and every ``judge``, ``flush`` and ``close`` raises
:class:`DeadLetterError` instead of waiting for a writer that is gone.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import sys
import zlib
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar, cast

from elastic_transport import SerializationError, TransportError
from elasticsearch import ApiError, AsyncElasticsearch
from scrapy.crawler import Crawler
from scrapy.settings import SETTINGS_PRIORITIES

from scrapy_zhdedup.config import DedupConfig, EsConfig, PipelineConfig, from_settings
from scrapy_zhdedup.errors import ConfigError, InvalidDocumentError
from scrapy_zhdedup.index.nearindex import CandidateKeys
from scrapy_zhdedup.judge import judge
from scrapy_zhdedup.model import Features, Match, Prepared, Verdict, verdict_for
from scrapy_zhdedup.similarity.fingerprinter import Fingerprinter
from scrapy_zhdedup.similarity.rule import NearRule
from scrapy_zhdedup.store.bloom import ExactFilter
from scrapy_zhdedup.store.meta import fingerprint_settings
from scrapy_zhdedup.text.clean import decode_html
from scrapy_zhdedup.workers import PreparePool, TurnBatcher, prepare_job, prepared_by

from ..client import acheck_reachable, make_async_client, quiet_client_logs, redact
from ..errors import BulkInterruptedError, DeadLetterError, LookupFailedError, LookupItemError
from ..index.chinese import SearchText, segment
from ..index.document import FIELD, Stored, item_fields
from ..index.template import ainstall
from ..operations import adrive
from ..privileges import CRAWL, Access, Needs
from .buffer import BulkBuffer, PendingBatch
from .deadletter import DEFAULT_NAME, DeadLetters
from .groupcommit import Entry, LookupWindow
from .journal import Journal, orphans
from .lookups import EsAnswers, EsLookups, query_features, repeat_id
from .retry import RetryPolicy
from .stats import EsStats
from .writer import Action, BulkWriter

logger = logging.getLogger(__name__)
T = TypeVar("T")

ASYNCIO_REACTOR = "twisted.internet.asyncioreactor.AsyncioSelectorReactor"
SETUP_TIMEOUT = 60.0  # seconds for template install and index creation at start
MAX_LOOKUP_BATCH = 200  # items judged with one mget and one _msearch by the pipeline
BULK_PARTS = 2  # requests a sealed batch is written in, at once (elasticsearch-py's parallel_bulk sends 500s)
MIN_BULK_PART = 250  # actions: a smaller batch goes in one request

IndexJob = tuple[str, str | None, str | bytes | None, bool]  # doc_id, text, html, whether to segment it for search
Indexable = tuple[Prepared, str | None]  # the document prepared, and its words for search (chinese.segment)


def prepare_for_index(fingerprinter: Fingerprinter, job: IndexJob) -> Indexable:
    """The worker processes' step (``es ingest``, the pipeline with ``ZHDEDUP_WORKERS``): the document
    prepared, and segmented for Chinese search when the index is.  Segmenting the whole text costs
    about as much as the fingerprint: there it runs on every core, not in the process that judges."""
    doc_id, text, html, segments = job
    prepared = prepare_job(fingerprinter, (doc_id, text, html))
    return prepared, segment(prepared.clean) if segments else None


def bulk_parts(actions: Sequence[Action]) -> list[list[Action]]:
    """``actions`` in up to ``BULK_PARTS`` parts of at least ``MIN_BULK_PART``, split by ``_id`` so that
    actions on one document stay in one request, in their order."""
    n = max(1, min(BULK_PARTS, len(actions) // MIN_BULK_PART))
    if n == 1:
        return [list(actions)]
    parts: list[list[Action]] = [[] for _ in range(n)]
    for action in actions:
        parts[zlib.crc32(action.id.encode("utf-8")) % n].append(action)
    return [part for part in parts if part]


def quiet_transport(settings: Any) -> None:
    """The client's INFO lines (two per item) drown a crawl's, and Scrapy's default ``LOG_LEVEL`` is DEBUG:
    they are silenced unless the project or command line asks for DEBUG (``LOG_LEVEL = "DEBUG"``,
    ``scrapy crawl -L DEBUG``) or the ``elastic_transport`` logger was given a level already."""
    asked = (str(settings.get("LOG_LEVEL")).upper() == "DEBUG"
             and (settings.getpriority("LOG_LEVEL") or 0) > SETTINGS_PRIORITIES["default"])
    if logging.getLogger("elastic_transport").level == logging.NOTSET and not asked:
        quiet_client_logs()


@dataclasses.dataclass
class _Answers(EsAnswers):
    """Elasticsearch's answers, and in annotate mode the document's own exact-repeat copy (stored under
    ``repeat_id``, which the lookup by content hash cannot see), so a rerun finds its verdict there too."""

    own: Match | None = None

    def previous(self, doc_id: str) -> Verdict | None:
        own = self.own.verdict if self.own is not None and self.own.doc_id == doc_id else None
        return super().previous(doc_id) or own


def _require_asyncio_reactor() -> None:
    """This backend runs on asyncio; under Scrapy that needs Twisted's asyncio reactor."""
    if "twisted.internet.reactor" not in sys.modules:
        return  # no Twisted reactor: plain asyncio (e.g. `zhdedup es ingest`)
    from twisted.internet import reactor
    from twisted.internet.asyncioreactor import AsyncioSelectorReactor

    if not isinstance(reactor, AsyncioSelectorReactor):
        raise ConfigError(
            f"ZHDEDUP_BACKEND = 'elasticsearch' needs Twisted's asyncio reactor, but "
            f"{type(reactor).__module__}.{type(reactor).__name__} is installed: set "
            f'TWISTED_REACTOR = "{ASYNCIO_REACTOR}" in the Scrapy settings'
        )


def hand_on(earlier: asyncio.Future[None] | None, decided: asyncio.Future[None]) -> None:
    """Mark a batch that decided nothing as decided once the batch before it has: the turn passes
    in call order, so the next batch cannot decide before an earlier one still in flight."""
    if earlier is None or earlier.done():
        decided.set_result(None)
    else:
        earlier.add_done_callback(lambda _: hand_on(None, decided) if not decided.done() else None)


class ElasticsearchBackend:
    """The :class:`~scrapy_zhdedup.pipelines.backends.Backend` on a shared Elasticsearch index."""

    def __init__(self, dedup: DedupConfig, es: EsConfig, *, stats: Any = None, index_duplicates: bool = False,
                 client: AsyncElasticsearch | None = None, backoff_base: float = 0.5,
                 backoff_cap: float = 30.0, workers: int = 1, in_order: bool = False, journal: bool = True,
                 needs: Needs = CRAWL) -> None:
        """``workers`` > 1: :meth:`judge` prepares items on that many processes (``ZHDEDUP_WORKERS``).
        ``in_order``: a lookup batch starts only when the one before it was decided, so the verdicts
        are those of arrival order however many items are in flight (groupcommit.py; ``es ingest``).
        ``journal=False``: buffered documents are not kept on disk (journal.py), for a caller that can
        judge them again after a kill (``es ingest`` from its checkpoint, ``es replay`` from its file);
        what dead writers left is taken over either way.  ``needs``: the privileges checked at open on a
        secured cluster (privileges.py)."""
        if es.es_bulk_size < 1:
            raise ConfigError(f"ZHDEDUP_ES_BULK_SIZE must be positive, got {es.es_bulk_size}")
        if es.es_flush_interval <= 0:
            raise ConfigError(f"ZHDEDUP_ES_FLUSH_INTERVAL must be positive, got {es.es_flush_interval}")
        if es.es_batch_window < 0:
            raise ConfigError(f"ZHDEDUP_ES_BATCH_WINDOW must be >= 0, got {es.es_batch_window}")
        if es.es_max_retries < 0:
            raise ConfigError(f"ZHDEDUP_ES_MAX_RETRIES must be >= 0, got {es.es_max_retries}")
        _require_asyncio_reactor()
        self.dedup, self.es = dedup, es
        keys, rule = CandidateKeys.from_config(dedup), NearRule.from_config(dedup)
        self.layout = keys.layout
        self.index = es.es_index
        self.index_duplicates = index_duplicates
        self.search = SearchText(es.es_text_field, es.es_analysis)
        self.stats = EsStats(stats)
        self.dead_letters = DeadLetters(Path(es.es_dead_letter or DEFAULT_NAME), self.index, self.stats)
        policy = RetryPolicy(es.es_max_retries, backoff_base, backoff_cap)
        self.lookups = EsLookups(self.index, keys, rule, policy, self.stats)
        self.writer = BulkWriter(self.index, policy, self.stats, refresh=True)
        self.journal = Journal(self.dead_letters.path.parent, self.index) if journal else None
        self.buffer = BulkBuffer(keys, rule, bulk_size=es.es_bulk_size, flush_interval=es.es_flush_interval,
                                 write=self._write, journal=self.journal)
        self._client = client
        self._own_client = client is None
        self._fingerprinter = Fingerprinter(dedup)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="zhdedup-es")
        # with worker processes, the items of one event-loop turn go to them together
        self._turns: TurnBatcher[IndexJob, Indexable] | None = None if workers <= 1 else TurnBatcher(
            PreparePool(dedup, prepare_for_index, workers, text="written").__enter__(),
            lambda send: asyncio.get_running_loop().call_soon(send))
        self._window: LookupWindow | None = None  # made on the event loop, by the first judge()
        self._decided: asyncio.Future[None] | None = None  # set once the last judge_many called has decided
        self._in_order = in_order
        self._needs = needs
        self._bloom = ExactFilter(error_rate=dedup.bloom_error_rate, initial_capacity=dedup.bloom_capacity)
        self._started = False
        self._loaded = f"Elasticsearch index {self.index} at {self.url}"  # with its document count, once open
        self._closed = False
        self._start_lock = asyncio.Lock()

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ElasticsearchBackend:
        """Built by the pipeline from ``ZHDEDUP_*`` settings (``ZHDEDUP_BACKEND = "elasticsearch"``)."""
        settings = crawler.settings
        quiet_transport(settings)
        es = from_settings(EsConfig, settings)
        if not es.es_dead_letter and settings.get("JOBDIR"):  # beside the crawl's other state
            es = dataclasses.replace(es, es_dead_letter=str(Path(settings["JOBDIR"]) / DEFAULT_NAME))
        pipeline = from_settings(PipelineConfig, settings)
        return cls(from_settings(DedupConfig, settings), es, stats=crawler.stats,
                   index_duplicates=pipeline.mode == "annotate", workers=pipeline.workers)

    @property
    def dead_letter_path(self) -> Path:
        return self.dead_letters.path

    @property
    def dead_lettered(self) -> int:
        return self.dead_letters.count

    @property
    def url(self) -> str:
        """The node's URL as it may be printed (without credentials)."""
        return redact(self.es.es_url)

    def describe(self) -> str:
        """What the index held at open, for the pipeline's line at open."""
        return self._loaded

    def local_state(self) -> tuple[Path, str]:
        """The pipeline's ledger of undelivered items lives beside the dead-letter file and the journal."""
        return self.dead_letters.path.parent, self.index

    def replay_hint(self) -> str:
        return f"zhdedup es replay {self.dead_letter_path} --url {self.url} --index {self.index}"

    # -- the Backend protocol ---------------------------------------------------------------------

    async def open(self) -> None:
        """Check everything a judgement needs before the first one: the dead-letter file can be written,
        the node answers, the index fits (template, band layout); raises a clear error otherwise."""
        await self._start()

    async def judge(self, doc_id: str, *, text: str | None, html: str | bytes | None,
                    document: dict[str, Any]) -> Verdict:
        """Judge one item and buffer it for writing (unless it is a duplicate in drop mode).

        ``document`` (the item's fields, without the page) is stored beside the ``zhdedup`` fields, with
        the main text as the page wrote it in ``ZHDEDUP_ES_TEXT_FIELD``; bytes values are stored decoded like a page.
        Items arriving together are looked up together (:meth:`judge_many`, groupcommit.py).  Raises
        EmptyTextError for items without text, InvalidDocumentError for a document Elasticsearch could
        not store, LookupFailedError (after dead-lettering the item) when lookups keep failing, and
        DeadLetterError once documents can go nowhere.
        """
        self._check_open()
        if self._turns is None:
            prepared = await self._on_worker(lambda: self._fingerprinter.prepare(doc_id, text=text, html=html))
            return await self.judge_prepared(prepared, document)
        # waited for on the one worker thread, so items reach the lookups in arrival order
        job, processes = (doc_id, text, html, self.search.segments), self._turns.pool
        future = self._turns.submit(job)
        prepared, words = await self._on_worker(lambda: prepared_by(processes, future, job))
        return await self.judge_prepared(prepared, document, words)

    async def judge_prepared(self, prepared: Prepared, document: dict[str, Any], words: str | None = None) -> Verdict:
        """:meth:`judge` of a document prepared elsewhere (``es ingest``'s worker processes), with its
        words for search when they were segmented there too (``chinese.segment``)."""
        self._check_open()
        if self._window is None:
            window = None if self._in_order else self.es.es_batch_window
            self._window = LookupWindow(self.judge_many, window, MAX_LOOKUP_BATCH)
        outcome = await self._window.submit((prepared, document, words))
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    async def judge_many(self, entries: Sequence[Entry]) -> list[Verdict | Exception]:
        """Judge prepared documents in order with one ``mget`` and one ``_msearch`` for all of them.

        The verdicts are those of judging them one at a time in this order: each is judged against
        Elasticsearch's answers plus everything buffered here, which includes the entries before it.
        A document that cannot be judged gets its exception (InvalidDocumentError, or LookupFailedError
        after it was dead-lettered) in its place.

        Batches may be looked up at the same time (the pipeline's window starts one while another is in
        flight), but they decide in the order they were called: a batch whose answers overtook an
        earlier batch's waits for its decisions, then finds its documents in the buffer.
        """
        self._check_open()
        earlier, decided = self._decided, asyncio.get_running_loop().create_future()
        self._decided = decided
        try:
            return await self._judge_many(entries, earlier, decided)
        finally:
            if not decided.done():  # lookups failed, or cancelled: nothing decided here
                hand_on(earlier, decided)

    async def _judge_many(self, entries: Sequence[Entry], earlier: asyncio.Future[None] | None,
                          decided: asyncio.Future[None]) -> list[Verdict | Exception]:
        client = await self._start()
        outcomes: list[Verdict | Exception | None] = [None] * len(entries)
        todo: list[tuple[int, Prepared, dict[str, Any]]] = []
        given = {i: words for i, (_, _, words) in enumerate(entries) if words is not None}
        for i, (prepared, document, _) in enumerate(entries):
            try:
                todo.append((i, prepared, self._storable(client, prepared.doc_id, document)))
            except InvalidDocumentError as exc:
                outcomes[i] = exc
        # a text this process stored or found stored probably needs no fingerprint: its exact lookup is likely to answer
        likely_new = [t for t in todo if t[1].digest not in self._bloom]
        await self._features([p for _, p, _ in likely_new])
        # segmented for search only when it will likely be stored: exact repeats in drop mode are not
        unsegmented = [t for t in (todo if self.index_duplicates else likely_new)
                       if t[0] not in given] if self.search.segments else []
        words: dict[int, str | None] = dict(given)
        if unsegmented:  # not otherwise: the worker thread may be waiting for a worker process's next item
            words |= dict(zip((i for i, _, _ in unsegmented), await self._on_worker(
                lambda: [self.search.words(p.clean) for _, p, _ in unsegmented])))
        digests = [p.digest for _, p, _ in todo]
        if self.index_duplicates:  # an exact repeat's own copy: its verdict, for a rerun (_Answers)
            digests += [repeat_id(p.digest, p.doc_id) for _, p, _ in todo]
        with self.buffer.judging() as since:
            try:
                found, near = await asyncio.gather(
                    adrive(client, self.lookups.exact(digests)),
                    adrive(client, self.lookups.near([query_features(p.featured(None)) for _, p, _ in likely_new])))
                exact, own = found[: len(todo)], found[len(todo):] or [None] * len(todo)
                near_of = {i: n for (i, _, _), n in zip(likely_new, near)}
                unanswered = [t for t, e in zip(todo, exact) if e is None and t[0] not in near_of]
                if unanswered:
                    await self._features([p for _, p, _ in unanswered])
                    more = await adrive(client, self.lookups.near([query_features(p.featured(None)) for _, p, _ in unanswered]))
                    near_of.update((i, n) for (i, _, _), n in zip(unanswered, more))
            except (TransportError, ApiError, LookupItemError) as exc:
                self.stats.inc("errors")
                self.dead_letters.write([  # with the text as written: what a replay judges (the page is not kept)
                    self.dead_letters.record(None, p.doc_id, {**d, self.search.text_field: p.written}, "lookup", exc)
                    for _, p, d in todo])
                for i, prepared, _ in todo:
                    error = LookupFailedError(
                        f"zhdedup: looking up {prepared.doc_id!r} in Elasticsearch at {self.url} failed after "
                        f"{self.es.es_max_retries} retries ({exc}); the item was written to {self.dead_letter_path} "
                        f"and not judged")
                    error.__cause__ = exc
                    outcomes[i] = error
                return cast("list[Verdict | Exception]", outcomes)
            if earlier is not None:
                await asyncio.wait([earlier])  # not `await earlier`: cancelling this batch must not cancel it
            for (i, prepared, document), flushed_exact, own_copy in zip(todo, exact, own):
                search_words = words.get(i)
                answers = _Answers(flushed_exact, near_of.get(i), self.buffer, since,
                                   functools.partial(self._enqueue_verdict, document=document, words=search_words),
                                   own_copy)
                # synchronous: nothing interleaves between decision and enqueue
                outcomes[i] = judge(prepared, answers, self._fingerprinter.features)
        decided.set_result(None)  # the next batch may decide while this one waits for the writer
        await self.buffer.backpressure()
        return cast("list[Verdict | Exception]", outcomes)

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("the Elasticsearch backend is closed")
        self.buffer.raise_if_failed()

    @staticmethod
    def _storable(client: AsyncElasticsearch, doc_id: str, document: dict[str, Any]) -> dict[str, Any]:
        """The document as it will be stored (page bytes as text); InvalidDocumentError if it cannot be."""
        if FIELD in document:
            raise InvalidDocumentError(
                f"item {doc_id!r} has a field named {FIELD!r}, which scrapy-zhdedup owns in the index")
        document = {key: decode_html(value) if isinstance(value, bytes) else value for key, value in document.items()}
        try:
            client.transport.serializers.get_serializer("application/json").dumps(document)
        except SerializationError as exc:
            raise InvalidDocumentError(f"item {doc_id!r} cannot be stored in Elasticsearch: {exc}") from exc
        return document

    async def flush(self) -> None:
        """Write everything buffered and wait until it is visible to searches."""
        if self._started:
            await self.buffer.flush()

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            await self.flush()
        finally:
            await self.buffer.stop()
            if self.journal is not None:
                self.journal.close()
            if self._own_client and self._client is not None:
                await self._client.close()
            self._executor.shutdown(wait=False)
            if self._turns is not None:
                self._turns.pool.__exit__(None, None, None)
        if self.dead_lettered:
            logger.error("zhdedup: %d documents could not be judged or stored in Elasticsearch; they are in %s. "
                         "Store them with: %s", self.dead_lettered, self.dead_letter_path, self.replay_hint())

    # -- start -------------------------------------------------------------------------------------

    async def _start(self) -> AsyncElasticsearch:
        async with self._start_lock:
            if self._client is None:
                self._client = make_async_client(self.es, caller_retries=True)  # we retry, with backoff and stats
            if self._started:
                return self._client
            self.dead_letters.check()
            await acheck_reachable(self._client, self.es.es_url, Access(self.index, self._needs))
            # creating an index can take longer than a lookup's timeout
            setup = self._client.options(request_timeout=max(self.es.es_timeout, SETUP_TIMEOUT))
            report = await ainstall(setup, self.index, self.layout, search=self.search, replace=False,
                                    fingerprint=fingerprint_settings(self.dedup))
            try:  # for the line at open only: an index another writer has just created may not answer yet
                count = f"{(await self._client.count(index=self.index))['count']} documents"
            except (ApiError, TransportError) as exc:
                count = f"documents not counted ({exc})"
            self._loaded = (f"Elasticsearch index {self.index} at {self.url}: {count} (template "
                            f"{report['template_action']}, index {report['index_action']})")
            if self.journal is not None:
                self.journal.open()
            await self._take_over_orphans()
            self.buffer.start()
            self._started = True
            return self._client

    async def _take_over_orphans(self) -> None:
        """Write what writers of this index that died before flushing left in their journals (journal.py)."""
        directory = self.dead_letters.path.parent
        with orphans(directory, self.index) as batches:
            if not batches:
                return
            count = sum(map(len, batches))
            logger.warning("zhdedup: %d documents judged by a writer of %s that stopped before storing them were "
                           "kept in %s; storing them now", count, self.index, directory)
            for actions in batches:
                await self._write(PendingBatch(-1, self.buffer.keys, self.buffer.rule, actions))

    # -- worker thread -----------------------------------------------------------------------------

    async def _on_worker(self, fn: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn)

    async def _features(self, batch: list[Prepared]) -> None:
        """Compute fingerprints and passage keys on the worker thread (a worker pool may have already)."""
        missing = [p for p in batch if p.features is None]
        if missing:
            await self._on_worker(lambda: [p.featured(self._fingerprinter.features) for p in missing])

    # -- buffer ------------------------------------------------------------------------------------

    def _enqueue_verdict(self, prepared: Prepared, verdict: Verdict, document: dict[str, Any],
                         words: str | None) -> None:
        """The store's ``remember``: what the verdict writes (first copies; duplicates in annotate mode).

        ``words`` is None when the text looked seen before (not segmented beforehand): it is segmented
        here only if it is written, since segmenting (~1 ms) runs on the event loop here."""
        digest = prepared.digest
        written = verdict.status == "unique" or self.index_duplicates
        if written or verdict.status == "exact":  # what the exact lookup finds; a dropped near repeat seen
            self._bloom.add(digest)  # again is therefore searched near beside that lookup, not after it
        if not written:
            return
        document = {**document, self.search.text_field: prepared.written}
        if words is None:
            words = self.search.words(prepared.clean)
        if verdict.status == "exact":
            self.buffer.enqueue(Action("index", repeat_id(digest, verdict.doc_id),
                                       self._source(verdict, document, words=words)))
        else:
            features = query_features(prepared.featured(None))
            self.buffer.enqueue(Action("create", digest, self._source(verdict, document, features, words)),
                                (digest, Match(verdict.doc_id, verdict.cluster, 0), features,
                                 verdict.status == "unique"))

    def _source(self, verdict: Verdict, document: dict[str, Any], features: Features | None = None,
                words: str | None = None) -> dict[str, Any]:
        return {**document, **Stored.of(verdict, datetime.now(timezone.utc), features=features,
                                        words=words).to_source(self.layout)}

    # -- writing ---------------------------------------------------------------------------------------

    async def _write(self, batch: PendingBatch) -> None:
        """One sealed batch (the buffer's writer task), in up to ``BULK_PARTS`` requests at once: a node
        indexes one bulk request of a one-shard index on one thread, and the last batch of a run, or
        the one a checkpoint waits for, would otherwise keep one core busy and the others idle.
        Failures are dead-lettered, 409s resolved once every part is written."""
        assert self._client is not None
        client = self._client
        parts = bulk_parts(batch.actions)
        results = await asyncio.gather(*(adrive(client, self.writer.write(part)) for part in parts),
                                       return_exceptions=True)
        conflicts = []
        try:
            for part, result in zip(parts, results):
                if isinstance(result, BaseException):  # a bug here must not leave documents unwritten and unreported
                    logger.error("zhdedup: unexpected error writing a bulk batch", exc_info=result)
                    self._dead(part, "bulk", result if isinstance(result, Exception) else BulkInterruptedError(repr(result)))
                    continue
                self.dead_letters.write([self.dead_letters.record(a, None, a.body or {}, "bulk", error)
                                         for a, error in result.failed])
                conflicts += result.conflicts
            await self._resolve_conflicts(batch, conflicts)
        except DeadLetterError:
            raise  # nowhere to put them: the buffer stops and tells every waiter
        except Exception as exc:
            logger.exception("zhdedup: unexpected error resolving a bulk batch's conflicts")
            self._dead(conflicts, "conflict", exc)

    async def _resolve_conflicts(self, batch: PendingBatch, conflicts: list[Action]) -> None:
        """A 409 on ``create``: the text is stored already, by another writer or by our own earlier attempt."""
        assert self._client is not None
        for action in conflicts:
            source = action.body or {}
            ours = Stored.from_source(source)
            assert ours is not None  # every create of ours carries its object
            try:
                [first] = await adrive(self._client, self.lookups.exact([action.id]))
            except (TransportError, ApiError, LookupItemError) as exc:
                self.stats.inc("errors")
                self._dead([action], "conflict", exc)
                continue
            if first is None:  # deleted since the 409: write ours again
                self.buffer.enqueue(action)
                continue
            if first.doc_id == ours.doc_id:  # our retried write landed the first time
                self.stats.inc("indexed")
                continue
            self.stats.inc("conflicts")
            batch.hashes[action.id] = first
            logger.info("zhdedup: %s was judged %s, but another writer stored the same text first as %s",
                        ours.doc_id, ours.status, first.doc_id)
            if self.index_duplicates:
                verdict = verdict_for(ours.doc_id, action.id, None, first, exact=True)
                self.buffer.enqueue(Action("index", repeat_id(action.id, ours.doc_id),
                                           self._source(verdict, item_fields(source), words=ours.words)))

    def _dead(self, actions: list[Action], stage: str, error: Exception) -> None:
        self.dead_letters.write([self.dead_letters.record(a, None, a.body or {}, stage, error) for a in actions])
