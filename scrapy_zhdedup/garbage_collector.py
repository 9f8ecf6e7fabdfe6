"""The garbage collector during a run (issue 40), in one place: ``es ingest``, ``scan``'s and the pipeline's
worker pools, and the Scrapy pipeline from a spider's open to its close.

What exists when a run starts (modules, dictionaries, Scrapy, Twisted, lxml, the store: some 120,000 objects
in a crawl process) lives as long as the run.  CPython's full collections traverse every object they track:
frozen (``gc.freeze``), these are left out of them, yet still freed by reference counting, and a cycle among
them is collected once they are thawed at the run's end.  A pool frozen before it forks also keeps its
children's collections from writing to (and so copying) every page they share.  Young collections run every
:data:`YOUNG_COLLECTION` allocations instead of 700: judging a document allocates a few hundred short-lived
containers.  Measured (benchmarks/README.md): in the benchmark crawl each full collection took ~50 ms of CPU,
~0.3 ms an item on the reactor, and the young ones ~0.15 ms an item; frozen and rarer they brought its CPU
from ~2.5–3.0 ms an item to about the bare crawl's (~2.1–2.3).  ``es ingest``'s full collections fell from
1.0 of 10 s of CPU on the news corpus, and the rarer young ones saved 5–7 % more.

A process that froze objects itself, or turned the collector off, is left as it is: :class:`Collector` tells
its own freezes (a pool's before it forks) from the caller's by the freeze count it left.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

YOUNG_COLLECTION = 10_000  # allocations between collections of the youngest generation during a run


class Collector:
    """This process's collector: frozen and tuned while at least one run holds it; the last to end thaws it."""

    def __init__(self) -> None:
        self.holders = 0
        self._threshold = gc.get_threshold()
        self._frozen = 0  # the freeze count this object left: a different one is the caller's own

    def freeze(self) -> None:
        """Leave what exists now out of every later collection (a pool's parent before it forks, a spawned
        worker once its dictionaries are loaded)."""
        gc.freeze()
        self._frozen = gc.get_freeze_count()

    def hold(self) -> bool:
        """Freeze what exists (collected first: start-up garbage is not kept for the run) and tune the young
        collections, or join the runs holding them already; False when the process manages the collector itself."""
        if self.holders == 0:
            if not gc.isenabled() or gc.get_freeze_count() not in (0, self._frozen):
                return False
            gc.collect()
            self.freeze()
            self._threshold = gc.get_threshold()
            gc.set_threshold(max(self._threshold[0], YOUNG_COLLECTION), *self._threshold[1:])
        self.holders += 1
        return True

    def release(self) -> None:
        """One holder less; the last thaws, and the collector runs as before."""
        self.holders -= 1
        if self.holders == 0:
            gc.set_threshold(*self._threshold)
            gc.unfreeze()
            self._frozen = 0

    @contextmanager
    def holding(self) -> Iterator[None]:
        """:meth:`hold` for the block."""
        held = self.hold()
        try:
            yield
        finally:
            if held:
                self.release()


COLLECTOR = Collector()
