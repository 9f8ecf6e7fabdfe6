"""The embedded backend's batches of items, judged on the reactor or on its judging thread (issue 40).

Handing each item to the thread alone cost two wake-ups per item (the thread's queue, then the reactor's
waker), each a trip of the GIL between the reactor and the judging thread, and features made one text at
a time.  :class:`JudgingThread` takes the items that arrive within a short window, and all that arrived
while a batch was judged, together, one batch at a time, in arrival order; a batch the caller finds cheap
is judged on the reactor itself, without the hand-offs, any other on the thread.  In the benchmark crawl
(benchmarks/README.md) the crawl process's CPU per item fell from ~4.5 to ~3.2 ms, 0.51–0.64× of the crawl
without the pipeline became 0.71–0.77×.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.defer import Deferred
from twisted.internet.threads import deferToThreadPool
from twisted.python.failure import Failure
from twisted.python.threadpool import ThreadPool

In = TypeVar("In")
Out = TypeVar("Out")
T = TypeVar("T")
JudgeMany = Callable[[list[In]], list["Out | Exception"]]  # run on the thread: a result (or error) per item


class _Timer(Protocol):
    def active(self) -> bool: ...
    def cancel(self) -> None: ...


class JudgingThread(Generic[In, Out]):
    """``judge_many`` called with the items submitted since its last call: on the reactor when ``here`` says
    the batch is cheap, else on a thread of its own."""

    def __init__(self, judge_many: JudgeMany[In, Out], name: str, window: float = 0.0, limit: int = 64,
                 reactor: Any = None, here: Callable[[list[In]], bool] | None = None) -> None:
        """``window``: how long an item that finds the thread idle waits for others to go with it (seconds);
        ``limit``: the most items of one batch; ``reactor``: the one running (the default), or what a test
        gives for its ``callLater`` and ``callFromThread``; ``here``: whether a batch is cheap enough to judge
        on the reactor itself, without the two hand-offs.  The thread starts with the first batch it gets."""
        self._judge_many = judge_many
        self._here = here
        self.window, self.limit = window, limit
        self._reactor = reactor
        self._pool = ThreadPool(minthreads=1, maxthreads=1, name=name)
        self._waiting: list[tuple[In, Deferred[Out]]] = []
        self._busy = False
        self._timer: _Timer | None = None  # releases the waiting items when the window closes

    async def submit(self, item: In) -> Out:
        """The result of ``item``, judged with whatever arrives with it; raises what judging it raised."""
        waiter: Deferred[Out] = Deferred()
        self._waiting.append((item, waiter))
        if not self._busy:
            if len(self._waiting) >= self.limit:
                self._release()
            elif self._timer is None:
                self._timer = self._get_reactor().callLater(self.window, self._release)
        return await maybe_deferred_to_future(waiter)

    def _release(self) -> None:
        if self._busy or not self._waiting:
            return
        if self._timer is not None:
            if self._timer.active():
                self._timer.cancel()
            self._timer = None
        batch, self._waiting = self._waiting[: self.limit], self._waiting[self.limit :]
        self._busy = True
        items, waiters = [item for item, _ in batch], [waiter for _, waiter in batch]
        if self._here is not None and self._here(items):
            self._answer(_called(self._judge_many, items), waiters)
            return
        self._run(self._judge_many, items).addBoth(self._answer, waiters)

    def _answer(self, results: list[Out | Exception] | Failure, waiters: list[Deferred[Out]]) -> None:
        self._busy = False
        for i, waiter in enumerate(waiters):
            result = results if isinstance(results, Failure) else results[i]
            if isinstance(result, (Exception, Failure)):
                waiter.errback(result)
            else:
                waiter.callback(result)
        self._release()  # what arrived meanwhile

    def _run(self, fn: Callable[..., T], *args: object) -> Deferred[T]:
        if not self._pool.started:
            self._pool.start()
        return deferToThreadPool(self._get_reactor(), self._pool, fn, *args)

    def _get_reactor(self) -> Any:
        if self._reactor is None:
            from twisted.internet import reactor  # imported late: the crawler chooses the reactor

            self._reactor = reactor
        return self._reactor

    async def close(self, last: Callable[[], object]) -> None:
        """Run ``last`` on the thread (after every item: Scrapy closes a pipeline once its items are done),
        then stop the thread."""
        try:
            await maybe_deferred_to_future(self._run(last))
        finally:
            self._pool.stop()


def _called(fn: Callable[[list[In]], T], items: list[In]) -> T | Failure:
    """``fn(items)``, or the failure it raised (as the thread's Deferred would carry it)."""
    try:
        return fn(items)
    except Exception:
        return Failure()
