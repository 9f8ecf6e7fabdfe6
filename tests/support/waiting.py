"""Waiting for something the test can observe (a count, a file, a process gone), with a deadline, rather
than sleeping for a guessed time that a slow machine or a retry's back-off can outlast."""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Callable


def wait_until(condition: Callable[[], object], what: str, timeout: float = 60.0, *,
               proc: subprocess.Popen[bytes] | subprocess.Popen[str] | None = None) -> None:
    """Poll ``condition`` until it holds; fail naming ``what`` after ``timeout`` seconds, or as soon as
    ``proc`` (the process that should bring it about, still running) has ended."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert proc is None or proc.poll() is None, f"the process ended (exit {proc.returncode}) before {what}"
        assert time.monotonic() < deadline, f"no {what} within {timeout:g} s"
        time.sleep(0.02)


async def wait_until_async(condition: Callable[[], object], what: str, timeout: float = 60.0) -> None:
    """:func:`wait_until` inside an event loop, which goes on running meanwhile."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"no {what} within {timeout:g} s"
        await asyncio.sleep(0.02)
