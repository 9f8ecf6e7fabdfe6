"""THE bulk path: every write to Elasticsearch (backend, ``dedup-index``, ``reconcile``) goes through here.

Requests and bulk items that fail transiently are retried by the one retry policy (retry.py), through
an outage within its budget; bulk items also on the 403 of a write-blocked index.  A ``create`` (or a write
conditional on a ``_seq_no``) answered 409 is not an error but a conflict for the caller to resolve (another
writer stored the same text, or changed the same key, first).  What Elasticsearch
rejects for good is returned to the caller, which raises (``dedup-index``, ``reconcile``) or writes
it to the dead-letter file (the backend; deadletter.py).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from elastic_transport import TransportError
from elasticsearch import ApiError

from ..operations import Call, Steps
from .retry import RetryPolicy, retryable
from .stats import EsStats


@dataclass
class Action:
    """One bulk operation: ``create``/``index`` a document, ``update`` with a partial doc, ``delete``."""

    op: str
    id: str
    body: dict[str, Any] | None = None  # the document, or the partial ``doc`` of an update
    index: str | None = None  # default: the writer's index
    seq: tuple[int, int] | None = None  # written only over this ``(_seq_no, _primary_term)`` (registry.py)

    def operations(self, default_index: str) -> list[dict[str, Any]]:
        meta: dict[str, Any] = {"_index": self.index or default_index, "_id": self.id}
        if self.seq is not None:
            meta["if_seq_no"], meta["if_primary_term"] = self.seq
        if self.op == "update":
            meta["retry_on_conflict"] = 3
            return [{"update": meta}, {"doc": self.body}]
        return [{self.op: meta}] if self.body is None else [{self.op: meta}, self.body]


@dataclass
class BulkResult:
    conflicts: list[Action] = field(default_factory=list)  # ``create`` or a conditional write answered 409
    failed: list[tuple[Action, Exception | dict[str, Any]]] = field(default_factory=list)  # rejected for good


@dataclass
class BulkWriter:
    index: str
    policy: RetryPolicy = field(default_factory=RetryPolicy)
    stats: EsStats = field(default_factory=EsStats)
    refresh: bool = False  # make the documents visible to searches before the request returns

    def write(self, actions: Sequence[Action], refresh: bool | None = None) -> Steps:
        """Steps: send ``actions``, retrying transient failures; returns a :class:`BulkResult`.
        ``refresh``: this request's, instead of the writer's."""
        refresh = self.refresh if refresh is None else refresh
        result = BulkResult()
        pending, attempt, sent = list(actions), 0, 0.0
        try:
            while pending:
                sent = yield from self.policy.ready(attempt)
                operations = [line for action in pending for line in action.operations(self.index)]
                try:
                    response = yield _bulk(operations, refresh)
                except (TransportError, ApiError) as exc:
                    if self.policy.transient(exc) and self.policy.retries(attempt, exc, sent):
                        attempt += 1
                        self.stats.inc("retries")
                        continue
                    if not self.policy.transient(exc):
                        self.policy.outage.answered(sent)
                    self.stats.inc("errors", len(pending))
                    result.failed += [(action, exc) for action in pending]
                    return result
                self.policy.outage.answered(sent)
                retry = []
                indexed = 0
                for action, item in zip(pending, response["items"]):
                    outcome = next(iter(item.values()))
                    status = outcome["status"]
                    if status < 300:
                        indexed += 1
                    elif status == 404 and action.op == "delete":
                        continue  # a document already gone is deleted (and not counted)
                    elif status == 409 and (action.op == "create" or action.seq is not None):
                        result.conflicts.append(action)
                    elif retryable(outcome):
                        retry.append((action, outcome))
                    else:
                        self.stats.inc("errors")
                        result.failed.append((action, outcome))
                self.stats.inc("indexed", indexed)
                if retry and attempt >= self.policy.max_retries:  # the node answered: no outage to wait out
                    self.stats.inc("errors", len(retry))
                    result.failed += retry
                    retry = []
                pending = [action for action, _ in retry]
                if pending:
                    attempt += 1
                    self.stats.inc("retries", len(pending))
        finally:
            self.policy.outage.release(sent)  # a probe cut by cancellation: the next waiter probes
        return result


# Of each item only what BulkWriter reads: a create answered in full is ~190 bytes of JSON for the client to
# decode (most of a claim's answer: ~16 keys an original), in this form ~30.
ITEM_FIELDS = "items.*.status,items.*.error"


def _bulk(operations: list[dict[str, Any]], refresh: bool) -> Call:
    return lambda client: client.bulk(operations=operations, refresh=refresh, filter_path=ITEM_FIELDS)


def describe(error: Exception | dict[str, Any]) -> tuple[int | None, str]:
    """HTTP status and reason of a failed request (an exception) or bulk item (its result)."""
    if isinstance(error, dict):
        return error.get("status"), json.dumps(error.get("error"), ensure_ascii=False)
    status = getattr(getattr(error, "meta", None), "status", None)
    hint = " (the request is larger than the node takes: http.max_content_length)" if status == 413 else ""
    return status, f"{type(error).__name__}: {error}{hint}"
