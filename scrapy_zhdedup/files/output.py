"""Output files that appear whole or not at all.

``zhdedup scan -o FILE`` writes to a temporary file beside FILE and renames it over FILE only when
the run finishes, so an interrupted run never leaves a truncated result where a complete one
was expected; and an output that names one of the inputs is refused before anything is opened
for writing (``-o c.jsonl c.jsonl`` used to empty the input).  An output that is not a regular file
(``-o /dev/null``, a named pipe) is written in place: renaming over it would replace the device
with a file (run as root, ``scan -o /dev/null`` left a root-only 0600 regular file at /dev/null).
The file gets the umask's mode, as a shell redirection's would (atomic.py).
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType
from typing import IO

from ..errors import OutputError
from .atomic import temporary_beside

STDOUT = "-"


def check_output(output: str | None, inputs: Iterable[str | Path]) -> None:
    """Raise, before any work, unless ``output`` is stdout or a file other than every input in a
    directory that exists (a mistyped directory is an error, not created)."""
    if output is None or output == STDOUT:
        return
    out = Path(output)
    if not out.parent.is_dir():
        raise OutputError(f"{output}: no such directory {out.parent}; create it first or choose another -o")
    for source in inputs:
        if str(source) == "-":
            continue
        same = out.resolve() == Path(source).resolve()
        if not same and out.exists() and Path(source).exists():
            same = os.path.samefile(out, source)
        if same:
            raise OutputError(f"the output {output} is the input {source}: choose another -o, the input would be lost")


class AtomicOutput:
    """A text stream for ``path`` (``None``/``-``: stdout) that replaces ``path`` only on success
    (a device or named pipe is written in place).  A write that fails (a full disk) names ``path``."""

    def __init__(self, path: str | None) -> None:
        self.path = None if path in (None, STDOUT) else Path(path)
        self._tmp: Path | None = None
        self._fh: IO[str] | None = None

    def __enter__(self) -> AtomicOutput:
        if self.path is None:
            self._fh = sys.stdout
            return self
        if self.path.exists() and not stat.S_ISREG(self.path.stat().st_mode):
            self._fh = open(self.path, "w", encoding="utf-8")
            return self
        fd, self._tmp = temporary_beside(self.path)
        self._fh = os.fdopen(fd, "w", encoding="utf-8")
        return self

    def write(self, text: str) -> None:
        assert self._fh is not None
        try:
            self._fh.write(text)
        except BrokenPipeError:
            raise  # a reader that stopped early: the caller's to handle quietly (cli.main)
        except OSError as exc:
            raise self._failed(exc) from exc

    def _failed(self, exc: OSError) -> OutputError:
        if self.path is None:
            return OutputError(f"cannot write to standard output ({exc.strerror or exc}); it is incomplete")
        kept = "is left as it was" if self._tmp is not None else "is incomplete"
        return OutputError(f"{self.path}: cannot write the output ({exc.strerror or exc}); it {kept}")

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._fh is None or self.path is None:
            return
        if self._tmp is None:  # a device or pipe, written in place
            self._fh.close()
            return
        try:
            try:
                self._fh.close()  # flushes what is buffered: a full disk may show only here
            except OSError as failed:
                if kind is None:
                    raise self._failed(failed) from failed
                return  # the error already on its way says more
            if kind is None:
                os.replace(self._tmp, self.path)
        finally:
            self._tmp.unlink(missing_ok=True)
