"""THE bulk path: every write to Elasticsearch (backend, ``dedup-index``, ``reconcile``) goes through here.

One retry policy for every request (:class:`RetryPolicy`): connection errors, timeouts, 429 and 5xx
are retried with capped, jittered exponential backoff, as elasticsearch-py's helpers do; for bulk
items also the 403 of a write-blocked index.  A ``create`` answered 409 is not an error but a
conflict for the caller to resolve (another writer stored the same text first).  What Elasticsearch
rejects for good is returned to the caller, which raises (``dedup-index``, ``reconcile``) or writes
it to the dead-letter file (the backend; deadletter.py).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from elastic_transport import ConnectionError as EsConnectionError
from elastic_transport import ConnectionTimeout, TransportError
from elasticsearch import ApiError

from .steps import Call, Sleep, Steps

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})


class Stats(Protocol):
    """Scrapy's stats collector, or anything with its ``inc_value``."""

    def inc_value(self, key: str, count: int = 1, start: int = 0) -> None: ...


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


@dataclass
class EsStats:
    """The ``zhdedup/es/*`` counters, on a Scrapy stats collector when there is one."""

    stats: Stats | None = None

    def inc(self, name: str, count: int = 1) -> None:
        self.inc_key(f"zhdedup/es/{name}", count)

    def inc_key(self, key: str, count: int = 1) -> None:
        if self.stats is not None and count:
            self.stats.inc_value(key, count)


@dataclass
class Action:
    """One bulk operation: ``create``/``index`` a document, ``update`` with a partial doc, ``delete``."""

    op: str
    id: str
    body: dict[str, Any] | None = None  # the document, or the partial ``doc`` of an update
    index: str | None = None  # default: the writer's index

    def operations(self, default_index: str) -> list[dict[str, Any]]:
        meta: dict[str, Any] = {"_index": self.index or default_index, "_id": self.id}
        if self.op == "update":
            meta["retry_on_conflict"] = 3
            return [{"update": meta}, {"doc": self.body}]
        return [{self.op: meta}] if self.body is None else [{self.op: meta}, self.body]


@dataclass
class BulkResult:
    conflicts: list[Action] = field(default_factory=list)  # ``create`` answered 409
    failed: list[tuple[Action, Exception | dict[str, Any]]] = field(default_factory=list)  # rejected for good


@dataclass
class BulkWriter:
    index: str
    policy: RetryPolicy = field(default_factory=RetryPolicy)
    stats: EsStats = field(default_factory=EsStats)
    refresh: bool = False  # make the documents visible to searches before the request returns

    def write(self, actions: Sequence[Action]) -> Steps:
        """Steps: send ``actions``, retrying transient failures; returns a :class:`BulkResult`."""
        result = BulkResult()
        pending, attempt = list(actions), 0
        while pending:
            operations = [line for action in pending for line in action.operations(self.index)]
            try:
                response = yield _bulk(operations, self.refresh)
            except (TransportError, ApiError) as exc:
                if self.policy.transient(exc) and attempt < self.policy.max_retries:
                    attempt += 1
                    self.stats.inc("retries")
                    yield Sleep(self.policy.delay(attempt))
                    continue
                self.stats.inc("errors", len(pending))
                result.failed += [(action, exc) for action in pending]
                return result
            retry = []
            for action, item in zip(pending, response["items"]):
                outcome = next(iter(item.values()))
                status = outcome["status"]
                if status < 300 or (status == 404 and action.op == "delete"):  # a document already gone is deleted
                    self.stats.inc("indexed")
                elif status == 409 and action.op == "create":
                    result.conflicts.append(action)
                elif retryable(outcome):
                    retry.append((action, outcome))
                else:
                    self.stats.inc("errors")
                    result.failed.append((action, outcome))
            if retry and attempt >= self.policy.max_retries:
                self.stats.inc("errors", len(retry))
                result.failed += retry
                retry = []
            pending = [action for action, _ in retry]
            if pending:
                attempt += 1
                self.stats.inc("retries", len(pending))
                yield Sleep(self.policy.delay(attempt))
        return result


def _bulk(operations: list[dict[str, Any]], refresh: bool) -> Call:
    return lambda client: client.bulk(operations=operations, refresh=refresh)


def retryable(error: Exception | dict[str, Any]) -> bool:
    """Whether a failed request (an exception) or bulk item (its result) may succeed if sent again later:
    the node down or overloaded, or the index write-blocked."""
    if isinstance(error, dict):
        return error.get("status") in RETRY_STATUSES or (error.get("error") or {}).get("type") == "cluster_block_exception"
    return RetryPolicy.transient(error)


def describe(error: Exception | dict[str, Any]) -> tuple[int | None, str]:
    """HTTP status and reason of a failed request (an exception) or bulk item (its result)."""
    if isinstance(error, dict):
        return error.get("status"), json.dumps(error.get("error"), ensure_ascii=False)
    status = getattr(getattr(error, "meta", None), "status", None)
    hint = " (the request is larger than the node takes: http.max_content_length)" if status == 413 else ""
    return status, f"{type(error).__name__}: {error}{hint}"
