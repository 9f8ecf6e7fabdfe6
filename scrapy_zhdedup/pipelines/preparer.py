"""How a backend prepares the items the pipeline hands it, one at a time: the one way for both backends.

With one worker the step runs on the backend's judging thread, when the judgement needs it.  With
``ZHDEDUP_WORKERS`` > 1 it runs on a :class:`~scrapy_zhdedup.workers.PreparePool`'s processes, the items
of one event-loop turn sent together (:class:`~scrapy_zhdedup.workers.TurnBatcher`), and the judging
thread waits for each result in arrival order: items are prepared in parallel and judged in order.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from typing import Generic

from ..config import DedupConfig
from ..similarity.fingerprinter import Fingerprinter
from ..workers import In, Out, PreparePool, Step, Texts, TurnBatcher, prepared_by

Schedule = Callable[[Callable[[], None]], object]  # runs a callback at the end of this loop turn


class ItemPreparer(Generic[In, Out]):
    def __init__(self, config: DedupConfig, fingerprinter: Fingerprinter, step: Step[In, Out], workers: int,
                 schedule: Schedule, *, text: Texts) -> None:
        """``step`` as :class:`~scrapy_zhdedup.workers.PreparePool` takes it, run here with ``fingerprinter``
        (the judging thread's own); ``schedule`` sends a loop turn's items to the processes (``call_soon`` on
        asyncio, Scrapy's ``CallLaterOnce``); ``text``: which texts a worker sends back."""
        self.fingerprinter, self.step = fingerprinter, step
        self._resources = ExitStack()
        self._turns: TurnBatcher[In, Out] | None = None if workers <= 1 else TurnBatcher(
            self._resources.enter_context(PreparePool(config, step, workers, text=text)), schedule)

    @property
    def parallel(self) -> bool:
        """Whether items are prepared on worker processes."""
        return self._turns is not None

    def submit(self, item: In) -> Callable[[], Out]:
        """Called as the item arrives (on the event loop); returns what gives its result (or raises what
        preparing it raised), to be called on the judging thread."""
        if self._turns is None:
            return lambda: self.step(self.fingerprinter, item)
        future, pool = self._turns.submit(item), self._turns.pool
        return lambda: prepared_by(pool, future, item)

    def close(self) -> None:
        """Stop the worker processes, if any."""
        self._resources.close()
