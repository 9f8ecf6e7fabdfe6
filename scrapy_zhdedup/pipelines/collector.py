"""The garbage collector while a spider crawls: what exists when it opens is frozen until it closes, and the
young collections run less often (issue 40), as ``es ingest`` does for its run.

CPython's full collections traverse every object the collector tracks, and a crawl process holds some
120,000 that live as long as it does (modules, Scrapy, Twisted, lxml, the store): in the benchmark crawl
each full collection took ~50 ms of CPU, 6–8 of them per 1,000 items, ~0.3 ms an item on the reactor,
which is what the crawl waits for (as much as judging the item's page).  Frozen (``gc.freeze``) they are
left out of the collections, which then take 2–5 ms; they are still freed by reference counting, and a
cycle among them is collected once they are thawed, when the last spider closes.  Young collections every
:data:`YOUNG_COLLECTION` allocations instead of 700: judging a page allocates a few hundred short-lived
containers, and the ~900 young collections of a 1,000-item crawl took ~0.15 ms an item.  Together they
brought the benchmark crawl's CPU from ~2.5–3.0 ms an item to about the bare crawl's (~2.1–2.3;
benchmarks/README.md).
A process that froze objects itself, or turned the collector off, is left as it is.
"""

from __future__ import annotations

import gc

YOUNG_COLLECTION = 10_000  # allocations between collections of the youngest generation while spiders crawl


class _Freezer:
    """Counts the spiders of this process that hold the freeze: the first freezes, the last to close thaws."""

    def __init__(self) -> None:
        self.holders = 0
        self._threshold = gc.get_threshold()

    def hold(self) -> bool:
        """Freeze what exists (collected first: start-up garbage is not kept for the crawl), or join the
        freeze of another spider of this process; False when the process manages the collector itself."""
        if self.holders == 0:
            if gc.get_freeze_count() or not gc.isenabled():
                return False
            gc.collect()
            gc.freeze()
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


FREEZER = _Freezer()
