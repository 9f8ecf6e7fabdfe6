"""One retry policy for every request to Elasticsearch: connection errors, timeouts, 429 and 5xx are retried
with capped, jittered exponential backoff, as elasticsearch-py's helpers do.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from elastic_transport import ConnectionError as EsConnectionError
from elastic_transport import ConnectionTimeout, TransportError
from elasticsearch import ApiError

from ..operations import Call, Sleep, Steps
from .stats import EsStats

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 5
    backoff_base: float = 0.5
    backoff_cap: float = 30.0

    @staticmethod
    def transient(exc: Exception) -> bool:
        if isinstance(exc, (EsConnectionError, ConnectionTimeout)):
            return True
        return isinstance(exc, ApiError) and exc.meta.status in RETRY_STATUSES

    def delay(self, attempt: int) -> float:
        """Seconds before retry number ``attempt`` (1, 2, ...): doubling, capped, jittered."""
        return min(self.backoff_cap, self.backoff_base * 2 ** (attempt - 1)) * random.uniform(0.5, 1.0)

    def call(self, call: Call, stats: EsStats, complete: Callable[[Any], bool] | None = None) -> Steps:
        """One request, retried while it fails transiently, or while ``complete`` says its answer is not
        (a search some of whose shards failed, on a node that died under it, answers without their
        documents); the last answer is returned as it is."""
        attempt = 0
        while True:
            try:
                response = yield call
            except (TransportError, ApiError) as exc:
                if not self.transient(exc) or attempt >= self.max_retries:
                    raise
            else:
                if complete is None or complete(response) or attempt >= self.max_retries:
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
