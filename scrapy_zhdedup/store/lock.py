"""The store's lock: one writer per store directory.

A store takes an exclusive, non-blocking ``flock`` on ``DIR/lock``: two writers on one store would each
keep their own state and the last to save would win, forgetting the other's documents; failing at open
costs the second one nothing.  The kernel drops the lock when the process dies (even on ``kill -9``),
so a stale lock file is harmless.
"""

from __future__ import annotations

import fcntl
import os
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
