"""One retry policy for every request to Elasticsearch: connection errors, timeouts, 429 and 5xx are retried
with capped, jittered exponential backoff, as elasticsearch-py's helpers do, and for as long as an outage
is shorter than its budget (``ZHDEDUP_ES_OUTAGE_TIMEOUT``).

Why a time budget and not only a count: a node restarting (a rolling restart, an upgrade) is away for
tens of seconds to minutes, and five retries are over in ten.  While it is away every request waits, so
the crawl's items wait in the pipeline and Scrapy stops fetching (its own backpressure); the backoff is
capped at a few seconds so that the node's return is noticed promptly, and only one request at a time
probes it (outage.py).  :class:`~.outage.Outage` is what every request of one client knows about the
node: one WARNING line when it goes away, one when it is back, with what was held meanwhile.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any

from elastic_transport import ConnectionError as EsConnectionError
from elastic_transport import ConnectionTimeout, TransportError
from elasticsearch import ApiError

from ..errors import ClosingError
from ..operations import Call, Sleep, Steps
from .outage import Outage
from .stats import EsStats

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

    def ready(self, attempt: int) -> Generator[Sleep, Any, float]:
        """Steps until a request may be sent, after ``attempt`` failures in a row: while the node is away
        (within the budget), until it is this request's turn to probe it or another's probe was answered;
        otherwise after its own backoff.  Returns the time.monotonic() it is sent at."""
        if attempt and (self.outage.since is None or self.outage.over()):
            yield Sleep(self.delay(attempt))
        while (wait := self.outage.turn(now := time.monotonic())) > 0:
            yield Sleep(wait)
        return now

    def retries(self, attempt: int, exc: Exception, sent: float) -> bool:
        """After the ``attempt``-th failure in a row of one request (``exc``, transient), sent at ``sent``
        (time.monotonic()): whether to retry it.  A request cut by this process's closing is not: it
        raises ClosingError, and says nothing of the node."""
        if self.outage.stopped:
            raise ClosingError(f"a request to Elasticsearch ended as the client was closing ({reason(exc)})") from exc
        self.outage.failed(reason(exc), sent, self.delay)
        if attempt < self.max_retries or not self.outage.over():
            return True
        self.outage.give_up(reason(exc))
        return False

    def call(self, call: Call, stats: EsStats, complete: Callable[[Any], bool] | None = None) -> Steps:
        """One request, retried while it fails transiently, or while ``complete`` says its answer is not
        (a search some of whose shards failed, on a node that died under it, answers without their
        documents); the last answer is returned as it is.  Such an answer says the node is there (its shards
        are starting, or another node died): it is retried within the outage budget but opens no outage, whose
        lines speak of a node that does not answer."""
        attempt, partial_since, sent = 0, None, 0.0
        try:
            while True:
                sent = yield from self.ready(attempt)
                try:
                    response = yield call
                except (TransportError, ApiError) as exc:
                    if not self.transient(exc):
                        self.outage.answered(sent)
                        raise
                    if not self.retries(attempt, exc, sent):
                        raise
                else:
                    if complete is None or complete(response):
                        self.outage.answered(sent)
                        return response
                    self.outage.answered(sent)  # the node answered: the next waiter need not wait for us
                    partial_since = sent if partial_since is None else partial_since
                    if attempt >= self.max_retries and time.monotonic() - partial_since >= self.outage.budget:
                        return response
                attempt += 1
                stats.inc("retries")
        finally:
            self.outage.release(sent)  # a probe cut by cancellation: the next waiter probes


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
