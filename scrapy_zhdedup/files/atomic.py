"""Atomic file replacement: a crash mid-save leaves the old file intact.

A new version is written to a temporary file beside the old one and renamed over it.  The
temporary file is created as ``open(2)`` creates any file (mode 0666 less the umask), like the
output of every Unix tool: ``tempfile.mkstemp`` would make it 0600 whatever the umask, and a
report or a store meant for colleagues or a web server could not be read by them.

The directory is synced after the rename, so once :func:`atomic_write` returns the new file
survives a power loss too (the embedded store empties its log only after that).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO


def temporary_beside(path: Path) -> tuple[int, Path]:
    """A new, empty file ``.NAME.XXXXXXXX.tmp`` beside ``path``, open for writing, with the umask's mode."""
    while True:
        tmp = path.parent / f".{path.name}.{os.urandom(4).hex()}.tmp"
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666), tmp
        except FileExistsError:
            continue  # 1 in 4 billion: another name


def atomic_write(path: Path, write: Callable[[BinaryIO], None]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = temporary_beside(path)
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
