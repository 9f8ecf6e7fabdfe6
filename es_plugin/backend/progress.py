"""Which claims are finished: each writer process keeps, in the key registry, the stamp up to which its
claims are done, so that no lookup accepts an original of another writer whose claim is still running.

Such a claim may yet find an earlier-stamped original that its document repeats and make it a repeat
(registry.py's order); a document judged the repeat of it in the meantime would name a repeat, which one
writer judging in the claims' order never does (in ``drop`` mode, a page it would deliver).  A writer
publishes its progress (a document ``w<writer>`` of the registry) once a batch's claims and the fixes
they made are written; a lookup reads the progress of the writers it is about to accept an original of
in the same ``mget`` as the originals, and waits for a claim still running.  A writer that publishes
nothing for ``CLAIM_WAIT`` seconds (killed mid-claim, or its registry writes failing) is taken as it
is, as before the registry had progress, until it publishes again; ``es reconcile`` judges what it left.
This process's own claims are never waited for: its judging sees what its own writing changed
(judging.py, ``_changed``).
"""

from __future__ import annotations

import os
import threading
import time
import uuid

DONE = "d"  # a progress document's one field: the stamp up to which its writer's claims are finished
CLAIM_WAIT = 5.0  # seconds a lookup waits for another writer's claim before taking its originals as they are
FIRST_POLL, LAST_POLL = 0.005, 0.1  # seconds between reads of a progress that has not reached a stamp

WRITER = f"{uuid.uuid4().hex[:8]}.{os.getpid():07d}"  # this process, as its stamps name it
_sequence = 0


def new_stamp() -> str:
    """A stamp later than any this process took before, ordered across writers by the clock first:
    milliseconds, writer, sequence."""
    global _sequence
    _sequence += 1
    return f"{time.time_ns() // 1_000_000:013d}.{WRITER}.{_sequence:010d}"


def writer_of(stamp: str) -> str | None:
    """The writer process that took ``stamp``; None for one taken by ``registry.fill`` (its originals
    were stored before they claimed: nothing is running) or not taken by :func:`new_stamp`."""
    parts = stamp.split(".")
    if len(parts) != 4 or not parts[1].strip("0"):
        return None
    return f"{parts[1]}.{parts[2]}"


def progress_id(writer: str) -> str:
    """The registry ``_id`` of ``writer``'s progress (key ids start with m, b or p)."""
    return f"w{writer}"


def pending(stamp: str, done: dict[str, str | None]) -> bool:
    """Whether the claim ``stamp`` names may still be running, given the writers' progress as read
    (``done``: by writer, None when it published none)."""
    writer = writer_of(stamp)
    if writer is None or writer == WRITER:
        return False
    reached = done.get(writer)
    return reached is None or reached < stamp


class Claims:
    """This process's claims in flight.  Its progress may be published only when none is running: a
    stamp taken by a claim begun on another thread is smaller than one a faster claim finished with."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running = 0
        self._done = ""
        self._published = ""

    def begin(self) -> None:
        """Before a claim's stamps are taken."""
        with self._lock:
            self._running += 1

    def end(self, stamps: list[str]) -> str | None:
        """After the claim and what it fixed are written (or it failed: its originals stay as they are);
        returns the progress to publish, or None while another claim runs or when it is published."""
        with self._lock:
            self._running -= 1
            self._done = max([self._done, *(s for s in stamps if writer_of(s) == WRITER)])
            if self._running or self._done == self._published:
                return None
            self._published = self._done
            return self._done


CLAIMS = Claims()


class Waits:
    """The writers a registry's lookups found stalled, with their progress as it stood when ``CLAIM_WAIT``
    ran out: not waited for again until it moves."""

    def __init__(self) -> None:
        self.stalled: dict[str, str | None] = {}

    def holds(self, stamp: str, done: dict[str, str | None]) -> bool:
        """Whether to wait for the claim ``stamp`` names: pending, of a writer not stalled where it is."""
        writer = writer_of(stamp)
        if writer in self.stalled and self.stalled[writer] != done.get(writer, self.stalled[writer]):
            del self.stalled[writer]  # it moved: alive again
        return pending(stamp, done) and writer not in self.stalled

    def give_up(self, stamps: list[str], done: dict[str, str | None]) -> list[str]:
        """Mark the writers of ``stamps`` stalled; returns those newly so."""
        newly = []
        for stamp in stamps:
            writer = writer_of(stamp)
            if writer is not None and writer not in self.stalled:
                self.stalled[writer] = done.get(writer)
                newly.append(writer)
        return newly


def polls() -> list[float]:
    """The pauses of one wait, together at most ``CLAIM_WAIT`` seconds."""
    pauses, pause, total = [], FIRST_POLL, 0.0
    while total + pause <= CLAIM_WAIT:
        pauses.append(pause)
        total += pause
        pause = min(pause * 2, LAST_POLL)
    return pauses
