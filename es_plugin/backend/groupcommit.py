"""Items that arrive together are looked up together.

The Scrapy pipeline hands the backend one item at a time, but up to ``CONCURRENT_ITEMS`` of them are
in flight at once.  :class:`LookupWindow` judges what it collected as one batch: one ``mget`` and one
near lookup instead of two per item.  Within a batch, items are judged in the order they
arrived.  Like a database's group commit: when no batch is being looked up, an item goes at once (with
whatever arrived in the same event-loop turn), so a lone item never waits; while one is, arrivals
gather until it returns, but at most ``window`` seconds (or until ``limit`` are waiting).

With ``window=None`` (``es ingest``) batches hold ``limit`` items: a full one starts while the one before
it is still in flight (at most ``IN_ORDER_DEPTH`` at once: one is looked up while the one before it is
written and its keys claimed), a partial one only when none is.  The batches decide in the order they
started (judging.py's turns), so the verdicts are those of judging one at a time in arrival order,
however many are in flight.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, NamedTuple

from scrapy_zhdedup.model import Prepared, Verdict

IN_ORDER_DEPTH = 2  # lookup batches of `es ingest` in flight at once
IN_ORDER_BATCH = 32  # documents a lookup batch of `es ingest` holds
DEFAULT_CONCURRENCY = IN_ORDER_DEPTH * IN_ORDER_BATCH  # documents in flight in `es ingest`


class Entry(NamedTuple):
    """One document handed to the window."""

    prepared: Prepared
    document: dict[str, Any]  # the item's fields, without the page
    words: str | None  # its text segmented for search, when that was done beforehand


JudgeMany = Callable[[Sequence[Entry]], Awaitable[list[Verdict | Exception]]]


class LookupWindow:
    def __init__(self, judge_many: JudgeMany, window: float | None, limit: int) -> None:
        self._judge_many = judge_many
        self.window, self.limit = window, limit
        self._waiting: list[tuple[Entry, asyncio.Future[Verdict | Exception]]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._running: set[asyncio.Task[None]] = set()  # strong references until done

    async def submit(self, entry: Entry) -> Verdict | Exception:
        """The verdict (or the exception) of this item, judged with whatever arrived with it."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Verdict | Exception] = loop.create_future()
        self._waiting.append((entry, future))
        if self.window is None:  # in order: a full batch goes now, a partial one when none is running
            if self._full():
                self._release()
            elif not self._running and self._timer is None:
                self._timer = loop.call_later(0, self._release)
        elif len(self._waiting) >= self.limit:
            self._release()
        elif self._timer is None:
            self._timer = loop.call_later(self.window if self._running else 0, self._release)
        return await future

    def _release(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        # An item whose submitter was cancelled waits for nothing: on Ctrl-C asyncio.run cancels every task, and
        # a batch started for those items would be a task nobody cancels, still running on a closed client
        # when the loop closes ("Task was destroyed but it is pending!" on stderr, after the one-line message).
        self._waiting = [(entry, future) for entry, future in self._waiting if not future.done()]
        batch, self._waiting = self._waiting[: self.limit], self._waiting[self.limit :]
        if batch:
            task = asyncio.get_running_loop().create_task(self._judge(batch))
            self._running.add(task)
            task.add_done_callback(self._done)

    def _full(self) -> bool:
        """In order: a full batch is waiting, and fewer than ``IN_ORDER_DEPTH`` are in flight."""
        return self.window is None and len(self._waiting) >= self.limit and len(self._running) < IN_ORDER_DEPTH

    def _done(self, task: asyncio.Task[None]) -> None:
        self._running.discard(task)
        if self._waiting and (not self._running or self._full()):  # what gathered need not wait out the window
            self._release()

    async def _judge(self, batch: list[tuple[Entry, asyncio.Future[Verdict | Exception]]]) -> None:
        try:
            outcomes = await self._judge_many([entry for entry, _ in batch])
        except Exception as exc:  # e.g. the start-up check failed: every item of the batch gets it
            outcomes = [exc] * len(batch)
        for (_, future), outcome in zip(batch, outcomes):
            if not future.done():
                future.set_result(outcome)
