"""What the backend asks Elasticsearch: :class:`EsLookups`, the realtime ``GET`` of ``_id = content
hash`` (exact repeats, written by any writer, refreshed or not) and the near lookup in the key registry
(registry.py: realtime multi-gets of the keys, then of the originals they name, each verified on its
stored sketch by the shared :meth:`~scrapy_zhdedup.similarity.rule.NearRule.accept`); a batch's content
hashes are read in the same ``mget`` as its keys (:meth:`EsLookups.both`).
What a judgement makes of the answers is judging.py's (``EsAnswers``).

What they read of the stored ``zhdedup`` objects, and how they decode it, is document.py's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from scrapy_zhdedup.index.nearindex import CandidateKeys
from scrapy_zhdedup.model import Features, Match
from scrapy_zhdedup.similarity.rule import NearRule

from ..errors import LookupItemError
from ..index.document import FIRST_COPY, Stored
from ..operations import Steps
from .registry import Registry, distinct, states_of
from .retry import RetryPolicy, got_all
from .stats import EsStats


@dataclass
class EsLookups:
    index: str
    keys: CandidateKeys
    rule: NearRule
    policy: RetryPolicy
    stats: EsStats

    def __post_init__(self) -> None:
        self.registry = Registry(self.index, self.keys, self.rule, self.policy, self.stats)

    def exact(self, digests: Sequence[str]) -> Steps:
        """Steps: the first copy of each text (or None), by one realtime ``mget`` (sees flushed
        documents before any refresh)."""
        if not digests:
            return []
        self.stats.inc("lookups")
        response = yield from self.policy.call(
            lambda c: c.mget(index=self.index, ids=list(digests), source_includes=FIRST_COPY, realtime=True),
            self.stats, got_all)
        return _first_copies(response["docs"])

    def near(self, features: Sequence[Features]) -> Steps:
        """Steps: for each document's features, the stored original the rule accepts and prefers (registry.py)."""
        answers = yield from self.registry.near(features)
        return answers

    def both(self, digests: Sequence[str], features: Sequence[Features]) -> Steps:
        """Steps: ``(exact(digests), near(features))`` with the first copies read in the registry's ``mget``
        of the keys (one request fewer: each costs the node about as much as 20 documents read)."""
        if not digests or not features:
            exact = yield from self.exact(digests)
            near = yield from self.near(features)
            return exact, near
        self.stats.inc("lookups", 2)
        ids = self.registry.keys_of(features)
        docs = [{"_index": self.index, "_id": d, "_source": {"includes": FIRST_COPY}} for d in digests] + [
            {"_index": self.registry.name, "_id": k} for k in distinct(ids)]
        response = yield from self.policy.call(lambda c: c.mget(docs=docs, realtime=True), self.stats, got_all)
        answered = response["docs"]
        near = yield from self.registry.near_in(features, ids, states_of(answered[len(digests):]))
        return _first_copies(answered[: len(digests)]), near


def _first_copies(docs: Sequence[dict[str, Any]]) -> list[Match | None]:
    """The first copy of each text an ``mget`` of content hashes answered (None: not stored)."""
    found: list[Match | None] = []
    for doc in docs:
        if "error" in doc:
            raise LookupItemError(doc["error"])
        first = Stored.from_source(doc["_source"]) if doc.get("found") else None
        found.append(None if first is None else Match(first.doc_id, first.cluster, 0, verdict=first.verdict()))
    return found
