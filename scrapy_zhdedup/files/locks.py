"""Per-process files and the writers that left them: a writer holds an exclusive ``flock`` on its own
file (the delivery ledger's, the Elasticsearch journal's) while it lives, and the kernel drops it when the
process dies (even on ``kill -9``), so a file nobody holds is one its writer left: :func:`unheld` finds
them for the next writer, and :func:`file_stem` names them.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path


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
