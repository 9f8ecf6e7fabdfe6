"""File locks: one writer per store directory, and the per-process files of writers that are gone.

A store takes an exclusive, non-blocking ``flock`` on ``DIR/lock``: two writers on one store would each
keep their own state and the last to save would win, forgetting the other's documents; failing at open
costs the second one nothing.  The kernel drops the lock when the process dies (even on ``kill -9``),
so a stale lock file is harmless, and a per-process file nobody holds (the delivery ledger's, the
Elasticsearch journal's) is one its writer left: :func:`unheld` finds them for the next writer.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

from ..errors import StoreError, StoreLockedError

LOCK_FILE = "lock"


class DirectoryLock:
    def __init__(self, directory: Path) -> None:
        self.path = directory / LOCK_FILE
        try:
            self._fd: int | None = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise StoreError(directory, f"cannot create the lock file ({exc.strerror})",
                             hint="Make the directory writable or point ZHDEDUP_STORE_DIR / --store elsewhere.") from exc
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(self._fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            os.close(self._fd)
            raise StoreLockedError(directory, holder) from None
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, f"{os.getpid()}\n".encode(), 0)

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor releases the flock
            self._fd = None


def file_stem(prefix: str, name: str, limit: int | None = None) -> str:
    """``prefix-NAME-DIGEST-``: ``name`` as a file name may hold it (its first ``limit`` characters), and a
    digest of all of it, so no two names share a stem."""
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{prefix}-{re.sub(r'[^A-Za-z0-9_.-]', '_', name)[:limit]}-{digest}-"


def unheld(paths: Iterable[Path], flags: int = os.O_RDONLY) -> Iterator[tuple[Path, int]]:
    """The files among ``paths`` that no live process holds, each opened with ``flags`` and locked; the
    descriptor is the caller's to close.  A file held by its writer, or gone meanwhile (another writer
    took it over), is passed over."""
    for path in paths:
        try:
            fd = os.open(path, flags)
        except FileNotFoundError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        yield path, fd
