"""Where verdicts are made: the embedded store in-process, or Elasticsearch (``es_plugin.store.backend``).

The pipeline talks to either through :class:`Backend`, so drop/annotate logic, stats and item
handling exist once.  ``ZHDEDUP_BACKEND`` names one (``embedded``, ``elasticsearch``) or gives
any class's dotted path; it is loaded like any Scrapy component, so this package never imports
``es_plugin`` itself.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, TypeVar

from scrapy.crawler import Crawler
from scrapy.utils.defer import maybe_deferred_to_future
from scrapy.utils.misc import build_from_crawler, load_object
from scrapy.utils.reactor import CallLaterOnce
from twisted.internet.threads import deferToThreadPool
from twisted.python.threadpool import ThreadPool

from ..config import DedupConfig, PipelineConfig, from_settings
from ..deduper import Deduper
from ..errors import ConfigError
from ..model import Prepared, Verdict
from ..workers import Job, PreparePool, TurnBatcher, prepare_job, prepared_by

logger = logging.getLogger(__name__)
T = TypeVar("T")

BACKENDS = {
    "embedded": "scrapy_zhdedup.pipelines.backends.EmbeddedBackend",
    "elasticsearch": "es_plugin.store.backend.ElasticsearchBackend",
}


class Backend(Protocol):
    async def open(self) -> None:
        """Check and prepare the store before the first item; raise a clear error if it cannot be used."""

    async def judge(self, doc_id: str, *, text: str | None, html: str | bytes | None,
                    document: dict[str, Any]) -> Verdict:
        """Judge one item (and, for a backend that stores documents, write it unless dropped)."""

    async def close(self) -> None:
        """Flush and persist; called once when the spider closes."""

    # Optional (read with getattr): ``describe() -> str``, what the store holds, for the one line logged
    # at open; ``local_state() -> (directory, name) | None``, where the pipeline keeps its ledger of
    # undelivered items (delivery.py), None when nothing is kept for the next run.


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
    backend: Backend = build_from_crawler(cls, crawler)
    return backend


class EmbeddedBackend:
    """The engine on one dedicated worker thread, and with ``workers`` > 1 its costly part on processes.

    Segmenting a long page is milliseconds of CPU; on the reactor thread it would stall every
    download.  One thread (not a pool) owns the store, so judgements stay in arrival order and
    the store needs no locks; the GIL is released often enough for the reactor to keep up.  With
    ``ZHDEDUP_WORKERS`` processes (workers.py) cleaning and fingerprinting use more cores; items are
    still judged on that thread, in arrival order.
    """

    def __init__(self, config: DedupConfig, store_dir: Path | None, workers: int = 1) -> None:
        self.deduper = Deduper.open(config, store_dir)
        self._pool = ThreadPool(minthreads=1, maxthreads=1, name="zhdedup")
        self._pool.start()
        # with worker processes, the items of one reactor turn go to them together (whichever reactor runs)
        self._turns: TurnBatcher[Job, Prepared] | None = None if workers <= 1 else TurnBatcher(
            PreparePool(config, prepare_job, workers, text=False).__enter__(), lambda send: CallLaterOnce(send).schedule())

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

    async def _on_worker(self, fn: Callable[[], T]) -> T:
        from twisted.internet import reactor  # imported late: the crawler chooses the reactor

        return await maybe_deferred_to_future(deferToThreadPool(reactor, self._pool, fn))

    async def open(self) -> None:
        """Nothing left to check: the store was loaded when the backend was built."""

    async def judge(self, doc_id: str, *, text: str | None, html: str | bytes | None,
                    document: dict[str, Any]) -> Verdict:
        if self._turns is None:
            return await self._on_worker(lambda: self.deduper.check(doc_id, text=text, html=html))
        # submitted now, waited for on the one judging thread: judged in arrival order, prepared in parallel
        job, processes = Job(doc_id, text, html), self._turns.pool
        future = self._turns.submit(job)
        return await self._on_worker(lambda: self.deduper.judge(prepared_by(processes, future, job)))

    async def close(self) -> None:
        try:
            await self._on_worker(self.deduper.close)
        finally:
            self._pool.stop()
            if self._turns is not None:
                self._turns.pool.__exit__(None, None, None)

