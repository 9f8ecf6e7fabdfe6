"""Unit tests: the pytest process alone. Starting a process here (``subprocess``, ``multiprocessing``, a fork)
fails the test, in its fixtures as in its body, and the node's URL (``$ZHDEDUP_TEST_ES_URL``) is hidden: a test
that needs either belongs in tests/integration/ or tests/es/."""

from __future__ import annotations

import multiprocessing.process
import os
import subprocess
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tests.support.es_node import URL_ENV


class ProcessStarted(BaseException):
    """Raised where a unit test would have started a process (not an Exception: no `except Exception` hides it)."""


def _refuse(*args: Any, **kwargs: Any) -> None:
    raise ProcessStarted("a unit test may not start a process: move it to tests/integration/")


@contextmanager
def _alone() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv(URL_ENV, raising=False)
        patch.setattr(subprocess.Popen, "__init__", _refuse)  # every subprocess.run, check_output, ...
        patch.setattr(multiprocessing.process.BaseProcess, "start", _refuse)  # pools, any start method
        for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system"):
            patch.setattr(os, name, _refuse)
        yield


# Fixtures are set up in an item's setup phase and torn down in its teardown: all three are covered.
@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    with _alone():
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    with _alone():
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, None, None]:
    with _alone():
        return (yield)
