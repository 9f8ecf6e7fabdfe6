"""The progress bar of the commands: on a terminal only, silent in logs and CI."""

from __future__ import annotations

import sys
from typing import Any, Protocol


class Bar(Protocol):
    def update(self, n: int = 1) -> Any: ...

    def __enter__(self) -> Bar: ...

    def __exit__(self, *exc: object) -> Any: ...


class _Silent:
    """What a command counts on when no terminal shows it: nothing, and tqdm not even imported (~0.08 s of a
    command's start-up, issue 40)."""

    def update(self, n: int = 1) -> None:
        return None

    def __enter__(self) -> _Silent:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def progress(total: int | None, unit: str, desc: str) -> Bar:
    """A progress bar on a terminal, silence in logs and CI."""
    if not sys.stderr.isatty():
        return _Silent()
    from tqdm import tqdm

    class _Bar(tqdm):
        """Without tqdm's monitor thread (it only corrects bars updated in large steps): a second thread
        would make the worker pools spawn instead of fork (workers.py)."""

        monitor_interval = 0

    bar: Bar = _Bar(total=total, unit=unit, unit_scale=True, desc=desc, file=sys.stderr)
    return bar
