"""Where verdicts are made: the embedded store in-process, or Elasticsearch (``es_plugin.backend.elasticsearch_backend``).

The pipeline talks to either through :class:`Backend`, so drop/annotate logic, stats and item
handling exist once.  ``ZHDEDUP_BACKEND`` names one (``embedded``, ``elasticsearch``) or gives the
dotted path of any :class:`Backend` subclass; it is loaded like any Scrapy component, so this package
never imports ``es_plugin`` itself.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from scrapy.crawler import Crawler
from scrapy.utils.misc import build_from_crawler, load_object
from scrapy.utils.reactor import CallLaterOnce

from ..config import DedupConfig, PipelineConfig, from_settings
from ..deduper import Deduper
from ..errors import ConfigError
from ..model import Prepared, Verdict
from ..workers import CHUNK, Job, prepare_job
from .batches import JudgingThread
from .preparer import ItemPreparer

logger = logging.getLogger(__name__)
T = TypeVar("T")
Sized = tuple[Callable[[], Prepared], int]  # what prepares an item, and the length of its page or text

# How long an item that finds the judging thread idle waits for others to be judged with it.  In the benchmark
# crawl (~250 items/s) 30 ms made batches of ~6 items (~2.5 without a window) and took 0.3-0.8 ms of the crawl
# process's CPU off each item (batched features, fewer hand-offs); a slower crawl's items wait at most this long.
BATCH_WINDOW = 0.03
# A batch of pages (or texts) this long in all is judged on the reactor itself (~0.1 ms of CPU a kB: ~25 ms),
# without the hand-offs to the judging thread and back; longer ones, and any that may make the store write a
# snapshot (SNAPSHOT_MARGIN bytes of log from it), go to the thread, which the reactor can interrupt.  On a quiet
# box the hand-offs cost the benchmark crawl ~0.8 ms of CPU an item, more than judging its page.
INLINE_BYTES = 256 << 10
SNAPSHOT_MARGIN = 4 << 20

BACKENDS = {
    "embedded": "scrapy_zhdedup.pipelines.backends.EmbeddedBackend",
    "elasticsearch": "es_plugin.backend.elasticsearch_backend.ElasticsearchBackend",
}


class Backend(ABC):
    """What the pipeline judges items with.  A backend implements :meth:`judge`, and :meth:`open` and
    :meth:`close` when it has something to check or to persist; the rest has defaults."""

    stores_documents: ClassVar[bool] = False  # judge() is given the item's fields (else an empty document)

    async def open(self) -> None:  # noqa: B027 (a default: nothing to check)
        """Check and prepare the store before the first item; raise a clear error if it cannot be used."""

    @abstractmethod
    async def judge(self, doc_id: str, *, text: str | None, html: str | bytes | None,
                    document: dict[str, Any]) -> Verdict:
        """Judge one item (and, for a backend that stores documents, write ``document``, the item's fields
        without the page, unless dropped)."""

    async def close(self) -> None:  # noqa: B027 (a default: nothing to persist)
        """Flush and persist; called once when the spider closes."""

    def describe(self) -> str:
        """What the store holds, for the one line logged at open."""
        return type(self).__name__

    def local_state(self) -> tuple[Path, str] | None:
        """Where the pipeline keeps its ledger of undelivered items (delivery.py): a directory and a name;
        None when nothing is kept for the next run."""
        return None


def load_backend(crawler: Crawler, name: str) -> Backend:
    """The backend ``ZHDEDUP_BACKEND`` names, built with its ``from_crawler``."""
    path = BACKENDS.get(name, name)
    try:
        cls = load_object(path)
    except ModuleNotFoundError as exc:
        hint = " (pip install 'scrapy-zhdedup[es]')" if exc.name in ("elasticsearch", "elastic_transport") else ""
        raise ConfigError(f"ZHDEDUP_BACKEND = {name!r}: cannot import {path}: {exc}{hint}") from exc
    except (ImportError, NameError, ValueError) as exc:
        raise ConfigError(f"ZHDEDUP_BACKEND = {name!r}: expected 'embedded', 'elasticsearch' or the dotted path "
                          f"of a backend class ({exc})") from exc
    if not (isinstance(cls, type) and issubclass(cls, Backend)):
        raise ConfigError(f"ZHDEDUP_BACKEND = {name!r}: {path} is not a subclass of {Backend.__module__}.Backend")
    backend: Backend = build_from_crawler(cls, crawler)
    return backend


class EmbeddedBackend(Backend):
    """The engine on one dedicated worker thread, and with ``workers`` > 1 its costly part on processes.

    Judging a long page is milliseconds of CPU; on the reactor thread it would stall every
    download.  One thread (not a pool) owns the store, so judgements stay in arrival order and
    the store needs no locks; the GIL is released often enough for the reactor to keep up.  Items go
    in batches (batches.py): those that arrive within :data:`BATCH_WINDOW`, or while a batch is
    judged, one batch at a time; a batch of short pages (:data:`INLINE_BYTES`) is judged on the
    reactor itself, where it costs less than the hand-offs.  With ``ZHDEDUP_WORKERS`` processes
    (workers.py) cleaning and fingerprinting use more cores; items are still judged in arrival order.
    """

    def __init__(self, config: DedupConfig, store_dir: Path | None, workers: int = 1) -> None:
        self.deduper = Deduper.open(config, store_dir)
        self._thread: JudgingThread[Sized, Verdict] = JudgingThread(
            self._judge_many, "zhdedup", window=BATCH_WINDOW, limit=CHUNK, here=self._cheap)
        # with worker processes, the items of one reactor turn go to them together (whichever reactor runs)
        self._preparer: ItemPreparer[Job, Prepared] = ItemPreparer(
            config, self.deduper.fingerprinter, prepare_job, workers, lambda send: CallLaterOnce(send).schedule(),
            text=False)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> EmbeddedBackend:
        settings = crawler.settings
        pipeline = from_settings(PipelineConfig, settings)
        return cls(from_settings(DedupConfig, settings), cls._store_dir(pipeline, settings.get("JOBDIR")),
                   pipeline.workers)

    @staticmethod
    def _store_dir(config: PipelineConfig, jobdir: str | None) -> Path | None:
        if config.store_dir:
            return Path(config.store_dir)
        if jobdir:
            return Path(jobdir) / "zhdedup"
        return None

    def describe(self) -> str:
        """What was loaded, for the pipeline's line at open."""
        store = self.deduper.store
        if store.directory is None:
            return "embedded store in memory only (no JOBDIR or ZHDEDUP_STORE_DIR): what this crawl sees is not kept"
        held = f"{store.judged} documents judged ({len(store)} stored)" if store.judged else "empty"
        return f"embedded store {store.directory}: {held}"

    def local_state(self) -> tuple[Path, str] | None:
        directory = self.deduper.store.directory
        return None if directory is None else (directory, "store")

    def _cheap(self, items: list[Sized]) -> bool:
        """Whether a batch is judged on the reactor (see INLINE_BYTES); never while worker processes prepare
        it (the reactor would wait for them)."""
        return (not self._preparer.parallel and sum(size for _, size in items) <= INLINE_BYTES
                and not self.deduper.store.saves_within(SNAPSHOT_MARGIN))

    def _judge_many(self, items: list[Sized]) -> list[Verdict | Exception]:
        """A batch's items prepared, their features made together (cheaper than one at a time, workers.py),
        then judged in order; an item's error is its result."""
        prepared = [_attempt(item) for item, _ in items]
        fingerprinter = self.deduper.fingerprinter
        if fingerprinter.batches and not self._preparer.parallel:  # a worker process sends them made
            with contextlib.suppress(Exception):  # the item that fails raises it again when judged alone
                fingerprinter.featured(p for p in prepared if isinstance(p, Prepared))
        return [p if isinstance(p, Exception) else _attempt(functools.partial(self.deduper.judge_prepared, p))
                for p in prepared]

    async def judge(self, doc_id: str, *, text: str | None, html: str | bytes | None,
                    document: dict[str, Any]) -> Verdict:
        # submitted now, judged on the one judging thread with the items that arrive with it: in arrival order
        size = len(html) if html is not None else len(text or "")
        return await self._thread.submit((self._preparer.submit(Job(doc_id, text, html)), size))

    async def close(self) -> None:
        try:
            await self._thread.close(self.deduper.close)
        finally:
            self._preparer.close()


def _attempt(fn: Callable[[], T]) -> T | Exception:
    """``fn()``, or the exception it raised (one item's, kept as its result)."""
    try:
        return fn()
    except Exception as exc:
        return exc
