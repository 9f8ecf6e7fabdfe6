"""One retry policy for every request to Elasticsearch: connection errors, timeouts, 429 and 5xx are retried
with capped, jittered exponential backoff, as elasticsearch-py's helpers do, and for as long as an outage
is shorter than its budget (``ZHDEDUP_ES_OUTAGE_TIMEOUT``).

Why a time budget and not only a count: a node restarting (a rolling restart, an upgrade) is away for
tens of seconds to minutes, and five retries are over in ten.  While it is away every request waits, so
the crawl's items wait in the pipeline and Scrapy stops fetching (its own backpressure); the backoff is
capped at a few seconds so that the node's return is noticed promptly.  :class:`Outage` is what every
request of one client knows about the node: one WARNING line when it goes away, one when it is back,
with what was held meanwhile.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from elastic_transport import ConnectionError as EsConnectionError
from elastic_transport import ConnectionTimeout, TransportError
from elasticsearch import ApiError

from ..operations import Call, Sleep, Steps
from .stats import EsStats

logger = logging.getLogger(__name__)

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
BACKOFF_CAP = 4.0  # seconds: a node back from a restart is noticed within them


def reason(error: Exception | dict[str, Any]) -> str:
    """Why a request (an exception) or a bulk item (its result) failed, in a few words with its HTTP
    status: never the node's whole error body."""
    if isinstance(error, dict):
        kind = (error.get("error") or {}).get("type") if isinstance(error.get("error"), dict) else None
        return f"HTTP {error.get('status')}" + (f" {kind}" if kind else "")
    if isinstance(error, ApiError):
        return f"HTTP {error.meta.status} {error.error}"
    if isinstance(getattr(error, "status", None), int):  # LookupItemError: one lookup of a request
        return f"HTTP {error.status}"  # type: ignore[attr-defined]
    if isinstance(error, ConnectionTimeout):
        return "no HTTP status: the request timed out"
    if isinstance(error, EsConnectionError):
        return "no HTTP status: the connection failed"
    return f"no HTTP status: {type(error).__name__}"


@dataclass
class Outage:
    """The node as the requests of one client see it: away from a request's first transient failure
    until a request is answered.  ``budget``: seconds the requests keep retrying while it is away.
    ``holding`` counts the items waiting for a judgement meanwhile (the backend's), for the lines."""

    url: str = ""
    budget: float = 0.0
    since: float | None = None  # time.monotonic() of the first failure, while the node is away
    back: float = 0.0  # time.monotonic() of the answer that ended the last outage
    held: int = 0  # items waiting for a judgement now
    peak: int = 0  # most items held at once in this outage
    failures: int = 0  # failed requests in this outage
    gave_up: bool = False  # the budget ran out in this outage

    @contextmanager
    def holding(self, items: int) -> Iterator[None]:
        self.held += items
        if self.since is not None:
            self.peak = max(self.peak, self.held)
        try:
            yield
        finally:
            self.held -= items

    def failed(self, why: str, sent: float) -> None:
        """A request sent at ``sent`` (time.monotonic()) failed; one sent before the node was back (a
        timeout from the restart) is retried without opening a new outage."""
        if self.since is None and sent < self.back:
            return
        self.failures += 1
        if self.since is not None:
            return
        self.since, self.peak, self.gave_up = time.monotonic(), self.held, False
        logger.warning("zhdedup: Elasticsearch at %s does not answer (%s); items wait for it, and a crawl slows "
                       "down, for up to %g s (ZHDEDUP_ES_OUTAGE_TIMEOUT)", self.url or "the node", why, self.budget)

    def answered(self, sent: float) -> None:
        """A request sent at ``sent`` was answered; one sent before the node went away (answered while it
        was shutting down) does not say it is back."""
        if self.since is None or sent < self.since:
            return
        seconds = time.monotonic() - self.since
        lost = ("past the budget, what could not wait is in the dead-letter file (see the line at close)"
                if self.gave_up else "nothing was given up")
        logger.warning("zhdedup: Elasticsearch at %s answers again after %.0f s: %d items were held meanwhile, "
                       "%d failed requests retried; %s", self.url or "the node", seconds, self.peak, self.failures,
                       lost)
        self.since, self.failures, self.peak, self.back = None, 0, 0, time.monotonic()

    def over(self) -> bool:
        """The node has been away longer than the budget (requests stop waiting for it)."""
        return self.since is not None and time.monotonic() - self.since >= self.budget

    def give_up(self, why: str) -> None:
        """A request stops retrying; said once per outage when it is the budget that ran out."""
        if self.gave_up or self.since is None or self.budget <= 0:
            return
        self.gave_up = True
        logger.warning("zhdedup: Elasticsearch at %s has not answered for %g s (ZHDEDUP_ES_OUTAGE_TIMEOUT; %s): "
                       "items are held no longer; what cannot be judged or stored goes to the dead-letter file, "
                       "not delivered (see the line at close)", self.url or "the node", self.budget, why)


@dataclass(frozen=True)
class RetryPolicy:
    """``max_retries``: retries every transient failure gets; more while the ``outage`` is within its budget."""

    max_retries: int = 5
    backoff_base: float = 0.5
    backoff_cap: float = BACKOFF_CAP
    outage: Outage = field(default_factory=Outage, compare=False)

    @staticmethod
    def transient(exc: Exception) -> bool:
        if isinstance(exc, (EsConnectionError, ConnectionTimeout)):
            return True
        return isinstance(exc, ApiError) and exc.meta.status in RETRY_STATUSES

    def delay(self, attempt: int) -> float:
        """Seconds before retry number ``attempt`` (1, 2, ...): doubling, capped, jittered."""
        return min(self.backoff_cap, self.backoff_base * 2 ** (attempt - 1)) * random.uniform(0.5, 1.0)

    def retries(self, attempt: int, why: str, sent: float) -> bool:
        """After the ``attempt``-th failure in a row of one request (``why``), sent at ``sent``
        (time.monotonic()): whether to retry it."""
        self.outage.failed(why, sent)
        if attempt < self.max_retries or not self.outage.over():
            return True
        self.outage.give_up(why)
        return False

    def call(self, call: Call, stats: EsStats, complete: Callable[[Any], bool] | None = None) -> Steps:
        """One request, retried while it fails transiently, or while ``complete`` says its answer is not
        (a search some of whose shards failed, on a node that died under it, answers without their
        documents); the last answer is returned as it is.  Such an answer says the node is there (its shards
        are starting, or another node died): it is retried within the outage budget but opens no outage, whose
        lines speak of a node that does not answer."""
        attempt, partial_since = 0, None
        while True:
            sent = time.monotonic()
            try:
                response = yield call
            except (TransportError, ApiError) as exc:
                if not self.transient(exc):
                    self.outage.answered(sent)
                    raise
                if not self.retries(attempt, reason(exc), sent):
                    raise
            else:
                if complete is None or complete(response):
                    self.outage.answered(sent)
                    return response
                partial_since = sent if partial_since is None else partial_since
                if attempt >= self.max_retries and time.monotonic() - partial_since >= self.outage.budget:
                    return response
            attempt += 1
            stats.inc("retries")
            yield Sleep(self.delay(attempt))


def retryable(error: Exception | dict[str, Any]) -> bool:
    """Whether a failed request (an exception) or bulk item (its result) may succeed if sent again later:
    the node down or overloaded, or the index write-blocked."""
    if isinstance(error, dict):
        return error.get("status") in RETRY_STATUSES or (error.get("error") or {}).get("type") == "cluster_block_exception"
    return RetryPolicy.transient(error)


UNAVAILABLE = frozenset({"no_shard_available_action_exception", "unavailable_shards_exception"})


def got_all(response: Any) -> bool:
    """Whether every document of an ``mget`` was answered: a shard still starting (an index another
    writer has just created) answers its documents with an error, to be asked again."""
    return not any((doc.get("error") or {}).get("type") in UNAVAILABLE for doc in response["docs"])
