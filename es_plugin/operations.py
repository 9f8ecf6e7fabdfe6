"""Elasticsearch operations written once, run by a sync or an async client.

An operation is a generator (:data:`Steps`) that yields what it needs done: a client call
(``client -> response``) or a :class:`Sleep` (a retry's backoff).  :func:`drive` runs it on the
sync client (the ``es`` CLI, ``dedup-index``, ``reconcile``), :func:`adrive` on the async one (the
Scrapy backend, ``es ingest``).  Errors of a call are thrown back into the generator at its
``yield``, so ``try``/``except`` around a step works as around a direct call.

Why not async everywhere: the sync commands and their callers (tests, scripts) keep a plain
``Elasticsearch`` client and no event loop, while the one bulk path and its retry policy still
exist once.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

from elastic_transport import TransportError
from elasticsearch import ApiError, AsyncElasticsearch, Elasticsearch


@dataclass(frozen=True)
class Sleep:
    seconds: float


Call = Callable[[Any], Any]  # client -> response (or an awaitable of it, for the async client)
Steps = Generator[Call | Sleep, Any, Any]


def drive(client: Elasticsearch, steps: Steps) -> Any:
    """Run ``steps`` on the sync client; returns the generator's return value."""
    value: Any = None
    error: Exception | None = None
    while True:
        try:
            step = steps.throw(error) if error is not None else steps.send(value)
        except StopIteration as stop:
            return stop.value
        value, error = None, None
        if isinstance(step, Sleep):
            time.sleep(step.seconds)
            continue
        try:
            value = step(client)
        except (ApiError, TransportError) as exc:
            error = exc


async def adrive(client: AsyncElasticsearch, steps: Steps) -> Any:
    """Run ``steps`` on the async client."""
    value: Any = None
    error: Exception | None = None
    while True:
        try:
            step = steps.throw(error) if error is not None else steps.send(value)
        except StopIteration as stop:
            return stop.value
        value, error = None, None
        if isinstance(step, Sleep):
            await asyncio.sleep(step.seconds)
            continue
        try:
            value = await step(client)
        except (ApiError, TransportError) as exc:
            error = exc
