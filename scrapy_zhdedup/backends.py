"""Where verdicts are made: the embedded store in-process, or Elasticsearch (es_backend.py).

The pipeline talks to either through :class:`Backend`, so drop/annotate logic, stats and item
handling exist once.
"""

from __future__ import annotations

from pathlib import Path
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from twisted.internet.threads import deferToThreadPool
from twisted.python.threadpool import ThreadPool
from scrapy.utils.defer import maybe_deferred_to_future

from .config import DedupConfig
from .engine import Deduper, Verdict

T = TypeVar("T")


class Backend(Protocol):
    async def judge(self, doc_id: str, *, text: str | None, html: str | bytes | None,
                    document: dict[str, Any]) -> Verdict:
        """Judge one item (and, for a backend that stores documents, write it unless dropped)."""

    async def close(self) -> None:
        """Flush and persist; called once when the spider closes."""


class EmbeddedBackend:
    """The engine on one dedicated worker thread.

    Segmenting a long page is milliseconds of CPU; on the reactor thread it would stall every
    download.  One thread (not a pool) owns the store, so judgements stay in arrival order and
    the store needs no locks; the GIL is released often enough for the reactor to keep up.
    """

    def __init__(self, config: DedupConfig, store_dir: Path | None) -> None:
        self.deduper = Deduper.open(config, store_dir)
        self._pool = ThreadPool(minthreads=1, maxthreads=1, name="zhdedup")
        self._pool.start()

    async def _on_worker(self, fn: Callable[[], T]) -> T:
        from twisted.internet import reactor  # imported late: the crawler chooses the reactor

        return await maybe_deferred_to_future(deferToThreadPool(reactor, self._pool, fn))

    async def judge(self, doc_id: str, *, text: str | None, html: str | bytes | None,
                    document: dict[str, Any]) -> Verdict:
        return await self._on_worker(lambda: self.deduper.check(doc_id, text=text, html=html))

    async def close(self) -> None:
        try:
            await self._on_worker(self.deduper.close)
        finally:
            self._pool.stop()
