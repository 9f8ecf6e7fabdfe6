"""Elasticsearch as the shared store: ``ZHDEDUP_BACKEND = "elasticsearch"``.

Several crawler processes can judge against one index.  The backend checks and starts what a
judgement needs, prepares each item (clean and hash, on a worker thread or worker processes) and hands
it to the parts that own the rest, each given the objects it works with:

* judging.py, the coordinator: the batching window (groupcommit.py), the order batches decide in,
  the lookups (lookups.py) and the answers each judgement sees; it returns the verdicts;
* writes.py: what a verdict writes; buffer.py: the documents from their verdict until they are
  written and their keys claimed (registry.py), kept on disk meanwhile (journal.py);
* batchwriter.py: a sealed batch written by the one bulk path (writer.py, retry.py), failures to the
  dead-letter file (deadletter.py), 409s resolved.

First copies are written with ``op_type=create`` under their hash, so two writers storing the same
text race on one ``_id`` and the loser gets a 409, which makes its document an exact repeat before its
verdict is returned; near repeats across writers are ordered by the key registry (registry.py).

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
import logging
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from elastic_transport import TransportError
from elasticsearch import ApiError, AsyncElasticsearch
from scrapy.crawler import Crawler
from scrapy.settings import SETTINGS_PRIORITIES

from scrapy_zhdedup.config import DedupConfig, EsConfig, PipelineConfig, from_settings
from scrapy_zhdedup.errors import ConfigError
from scrapy_zhdedup.fingerprint_settings import fingerprint_settings
from scrapy_zhdedup.index.bloom import ExactFilter
from scrapy_zhdedup.index.nearindex import CandidateKeys
from scrapy_zhdedup.model import Prepared, Verdict
from scrapy_zhdedup.pipelines.backends import Backend
from scrapy_zhdedup.pipelines.preparer import ItemPreparer
from scrapy_zhdedup.similarity.fingerprinter import Fingerprinter
from scrapy_zhdedup.similarity.rule import NearRule
from scrapy_zhdedup.workers import Job, prepare_job

from ..client import acheck_reachable, make_async_client, quiet_client_logs, redact
from ..index.chinese import SearchText, segment
from ..index.template import ainstall
from ..privileges import CRAWL, Access, Needs
from .batchwriter import BatchWriter
from .buffer import BulkBuffer, PendingBatch
from .deadletter import DEFAULT_NAME, DeadLetters
from .groupcommit import IN_ORDER_BATCH, Entry
from .journal import Journal, orphans
from .judging import JudgingCoordinator, on_thread
from .lookups import EsLookups
from .outage import Outage
from .retry import BACKOFF_CAP, RetryPolicy
from .stats import EsStats
from .writer import BulkWriter
from .writes import VerdictWrites

logger = logging.getLogger(__name__)
T = TypeVar("T")

ASYNCIO_REACTOR = "twisted.internet.asyncioreactor.AsyncioSelectorReactor"
SETUP_TIMEOUT = 60.0  # seconds for template install and index creation at start
MAX_LOOKUP_BATCH = 200  # items judged with one exact and one near lookup by the pipeline



class IndexJob(NamedTuple):
    """A document to prepare for the index: a :class:`~scrapy_zhdedup.workers.Job`'s fields, and whether
    to segment its text for search."""

    doc_id: str
    text: str | None
    html: str | bytes | None
    segments: bool


class Indexable(NamedTuple):
    prepared: Prepared
    words: str | None  # its text segmented for search (chinese.segment), when the index is


def prepare_for_index(fingerprinter: Fingerprinter, job: IndexJob) -> Indexable:
    """The worker processes' step (``es ingest``, the pipeline with ``ZHDEDUP_WORKERS``): the document
    prepared, and segmented for Chinese search when the index is.  Segmenting the whole text costs
    about as much as the fingerprint: there it runs on every core, not in the process that judges."""
    prepared = prepare_job(fingerprinter, Job(job.doc_id, job.text, job.html))
    return Indexable(prepared, segment(prepared.clean) if job.segments else None)


def quiet_transport(settings: Any) -> None:
    """The client's INFO lines (two per item) drown a crawl's, and Scrapy's default ``LOG_LEVEL`` is DEBUG:
    they are silenced unless the project or command line asks for DEBUG (``LOG_LEVEL = "DEBUG"``,
    ``scrapy crawl -L DEBUG``) or the ``elastic_transport`` logger was given a level already."""
    asked = (str(settings.get("LOG_LEVEL")).upper() == "DEBUG"
             and (settings.getpriority("LOG_LEVEL") or 0) > SETTINGS_PRIORITIES["default"])
    if logging.getLogger("elastic_transport").level == logging.NOTSET and not asked:
        quiet_client_logs()


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


class ElasticsearchBackend(Backend):
    """The :class:`~scrapy_zhdedup.pipelines.backends.Backend` on a shared Elasticsearch index."""

    stores_documents = True

    def __init__(self, dedup: DedupConfig, es: EsConfig, *, stats: Any = None, index_duplicates: bool = False,
                 client: AsyncElasticsearch | None = None, backoff_base: float = 0.5,
                 backoff_cap: float = BACKOFF_CAP, workers: int = 1, in_order: bool = False,
                 needs: Needs = CRAWL) -> None:
        """``workers`` > 1: :meth:`judge` prepares items on that many processes (``ZHDEDUP_WORKERS``).
        ``in_order``: lookup batches of ``IN_ORDER_BATCH`` items, a full one started while the one before it
        is written, instead of gathering for ``ZHDEDUP_ES_BATCH_WINDOW`` (groupcommit.py; ``es ingest``); the
        verdicts are those of arrival order either way (judging.py).  ``needs``: the privileges checked at
        open on a secured cluster (privileges.py)."""
        _require_asyncio_reactor()
        self.dedup, self.es = dedup, es
        keys, rule = CandidateKeys.from_config(dedup), NearRule.from_config(dedup)
        self.layout = keys.layout
        self.index = es.es_index
        self.search = SearchText(es.es_text_field, es.es_analysis)
        self.stats = EsStats(stats)
        self.dead_letters = DeadLetters(Path(es.es_dead_letter or DEFAULT_NAME), self.index, self.stats,
                                        mode="annotate" if index_duplicates else "drop")
        self.outage = Outage(self.url, es.es_outage_timeout)
        policy = RetryPolicy(es.es_max_retries, backoff_base, backoff_cap, self.outage)
        self.lookups = EsLookups(self.index, keys, rule, policy, self.stats)
        self.writer = BulkWriter(self.index, policy, self.stats)
        self.writes = VerdictWrites(self.layout, self.search, index_duplicates, ExactFilter(
            error_rate=dedup.bloom_error_rate, initial_capacity=dedup.bloom_capacity))
        self.journal = Journal(self.dead_letters.path.parent, self.index)
        self.buffer = BulkBuffer(keys, rule, bulk_size=es.es_bulk_size, flush_interval=es.es_flush_interval,
                                 journal=self.journal)
        self._client = client
        self._own_client = client is None
        self._fingerprinter = Fingerprinter(dedup)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="zhdedup-es")
        # with worker processes, the items of one event-loop turn go to them together
        self._preparer: ItemPreparer[IndexJob, Indexable] = ItemPreparer(
            dedup, self._fingerprinter, prepare_for_index, workers,
            lambda send: asyncio.get_running_loop().call_soon(send), text="written")
        self._judging: JudgingCoordinator | None = None  # made at start, with the client
        self._window = None if in_order else es.es_batch_window
        self._needs = needs
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
        return self.dead_letters.replay_hint(self.url)

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
        # segmented beforehand on worker processes only: in this process, judging segments what it stores
        prepare = self._preparer.submit(IndexJob(doc_id, text, html, self.search.segments and self._preparer.parallel))
        # waited for on the one worker thread, so items reach the lookups in arrival order
        indexable = await on_thread(self._executor, prepare)
        return await self.judge_prepared(indexable.prepared, document, indexable.words)

    async def judge_prepared(self, prepared: Prepared, document: dict[str, Any], words: str | None = None) -> Verdict:
        """:meth:`judge` of a document prepared elsewhere (``es ingest``'s worker processes), with its
        words for search when they were segmented there too (``chinese.segment``)."""
        self._check_open()
        with self.outage.holding(1):
            return await (await self._start()).judge(Entry(prepared, document, words))

    async def judge_many(self, entries: Sequence[Entry]) -> list[Verdict | Exception]:
        """Judge prepared documents in order with one exact and one near lookup for all of them
        (judging.py): the verdicts are those of judging them one at a time in this order."""
        self._check_open()
        with self.outage.holding(len(entries)):
            return await (await self._start()).judge_many(entries)

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("the Elasticsearch backend is closed")
        self.buffer.raise_if_failed()

    async def flush(self) -> None:
        """Write everything buffered and wait until it is visible to searches."""
        if self._judging is not None:
            await self.buffer.flush()

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            await self.flush()
        finally:
            self.outage.stop()  # what fails from here (a lookup still in flight) was cut by our closing
            await self.buffer.stop()
            self.journal.close()
            if self._own_client and self._client is not None:
                await self._client.close()
            self._executor.shutdown(wait=False)
            self._preparer.close()
        if self.dead_lettered:
            logger.error("zhdedup: %s", self.dead_letters.summary(self.url))

    # -- start -------------------------------------------------------------------------------------

    async def _start(self) -> JudgingCoordinator:
        async with self._start_lock:
            if self._client is None:
                self._client = make_async_client(self.es, caller_retries=True)  # we retry, with backoff and stats
            if self._judging is not None:
                return self._judging
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
            self.journal.open()
            writer = BatchWriter(self._client, self.writer, self.lookups, self.writes, self.dead_letters, self.stats)
            await self._take_over_orphans(writer)
            self.buffer.start(writer)
            self._judging = JudgingCoordinator(
                self._client, self.lookups, self.buffer, self.writes, self.dead_letters, self._fingerprinter,
                self._executor, window=self._window, limit=MAX_LOOKUP_BATCH if self._window is not None else IN_ORDER_BATCH,
                url=self.url)
            return self._judging

    async def _take_over_orphans(self, writer: BatchWriter) -> None:
        """Write what writers of this index that died before flushing left in their journals (journal.py)."""
        directory = self.dead_letters.path.parent
        with orphans(directory, self.index) as batches:
            if not batches:
                return
            count = sum(map(len, batches))
            logger.warning("zhdedup: %d documents judged by a writer of %s that stopped before storing them were "
                           "kept in %s; storing them now", count, self.index, directory)
            for actions in batches:
                for action in await writer.write(PendingBatch(-1, self.buffer.keys, self.buffer.rule, actions)):
                    self.buffer.enqueue(action)
