"""Items a crawl judged but did not deliver yet, kept on disk: a crawl killed in between delivers them
when it runs again.

"Delivered" is Scrapy's word for an item it is done with: every pipeline passed it and the feed
exports got it (the ``item_scraped`` signal), or a pipeline dropped it (``item_dropped``).  A store
records a verdict before the item moves on (the embedded store's log, Elasticsearch's journal), so a
``kill -9`` between the two leaves a verdict for an item nobody received; on the next run the item is
"judged before" and, with ``ZHDEDUP_RERUN = "new"``, would be held back for good.  The ledger closes
that gap: an item's id is noted before it is judged (``+id``) and struck off when Scrapy is done
with it (``-id``), each line one unbuffered ``write`` (a killed process's writes survive it; ~2 µs).
What earlier runs noted and never struck off is :attr:`DeliveryLedger.undelivered`.

One file per process (``.zhdedup-undelivered-<name>-<random>.log``, flock'ed while it lives), so
several crawlers sharing a directory (Elasticsearch writers of one index) never mix theirs; a new one
takes over the files of processes that are gone (their lock is free), copying what they left
undelivered into its own file before removing theirs, so a kill during the takeover loses nothing.
A file is removed at a clean close when nothing in it is left undelivered.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import uuid
from pathlib import Path

from ..errors import StoreError, StoreFailedError
from ..files.locks import file_stem, unheld

logger = logging.getLogger(__name__)

PREFIX = ".zhdedup-undelivered"


class DeliveryLedger:
    """``note(id)`` before judging, ``done(id)`` when Scrapy is done with the item; :attr:`undelivered`:
    the ids earlier runs judged and never delivered."""

    def __init__(self, directory: Path, name: str) -> None:
        self.directory = directory
        self.stem = file_stem(PREFIX, name, 60)
        self.path = directory / f"{self.stem}{uuid.uuid4().hex[:16]}.log"
        self.undelivered: set[str] = set()  # left by earlier runs, until delivered now
        self._pending: set[str] = set()  # this run's, noted and not done yet
        self._fd: int | None = None

    def open(self) -> None:
        """Lock this process's file and take over what processes that are gone left undelivered."""
        try:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a fresh name: never held by another
            taken = self._take_over()
            self._write("".join(f"+{json.dumps(i)}\n" for i in sorted(self.undelivered)))
            for path, fd in taken:
                path.unlink(missing_ok=True)
                os.close(fd)
        except OSError as exc:
            raise StoreError(self.path, f"cannot keep the ledger of undelivered items ({exc.strerror or exc})",
                             hint="Make the directory writable, or point the store elsewhere.") from exc

    def _take_over(self) -> list[tuple[Path, int]]:
        taken = []
        for path, fd in unheld(p for p in sorted(self.directory.glob(f"{self.stem}*.log")) if p != self.path):
            self.undelivered |= _replay(path)
            taken.append((path, fd))
        return taken

    def note(self, doc_id: str) -> None:
        """``doc_id`` is about to be judged; raises StoreFailedError if that cannot be written (a full
        disk): judging it anyway could lose it to a kill."""
        if doc_id in self._pending:
            return
        try:
            self._write(f"+{json.dumps(doc_id)}\n")
        except OSError as exc:
            raise StoreFailedError(f"{self.path}: cannot note {doc_id!r} as being judged ({exc.strerror or exc}); "
                                   f"free space, then run again") from exc
        self._pending.add(doc_id)

    def done(self, doc_id: str) -> None:
        """Scrapy is done with ``doc_id`` (delivered, or dropped by a pipeline).  Never raises: a mark that
        cannot be written leaves the item undelivered, so the next run delivers it again (never loses it)."""
        if doc_id not in self._pending and doc_id not in self.undelivered:
            return
        self._pending.discard(doc_id)
        self.undelivered.discard(doc_id)
        try:
            self._write(f"-{json.dumps(doc_id)}\n")
        except OSError as exc:
            logger.warning("zhdedup: %s: cannot mark %r delivered (%s); the next run delivers it again",
                           self.path, doc_id, exc.strerror or exc)

    def _write(self, text: str) -> None:
        if self._fd is None or not text:
            return
        data = memoryview(text.encode("ascii"))  # ids are JSON-escaped: a lone surrogate too
        while data:
            data = data[os.write(self._fd, data):]

    def close(self) -> None:
        """Release the file; it goes if nothing in it is left undelivered (else the next run takes it)."""
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            if not self._pending and not self.undelivered:
                self.path.unlink(missing_ok=True)
        os.close(self._fd)
        self._fd = None


def _replay(path: Path) -> set[str]:
    """The ids a ledger file leaves undelivered; a last line cut short (a kill mid-write) is skipped."""
    left: set[str] = set()
    for line in path.read_text(encoding="ascii", errors="replace").splitlines():
        try:
            doc_id = json.loads(line[1:])
        except ValueError:
            logger.warning("zhdedup: %s: a line cut short, skipped", path)
            continue
        if line[:1] == "+":
            left.add(doc_id)
        elif line[:1] == "-":
            left.discard(doc_id)
    return left
