"""The progress bar of the commands: on a terminal only, silent in logs and CI."""

from __future__ import annotations

import sys

from tqdm import tqdm


class _Bar(tqdm):
    """Without tqdm's monitor thread (it only corrects bars updated in large steps): a second thread
    would make the worker pools spawn instead of fork (workers.py)."""

    monitor_interval = 0


def progress(total: int | None, unit: str, desc: str) -> tqdm:
    """A progress bar on a terminal, silence in logs and CI."""
    return _Bar(total=total, unit=unit, unit_scale=True, desc=desc, disable=not sys.stderr.isatty(), file=sys.stderr)
