"""What the backend asks Elasticsearch, and the store :func:`~scrapy_zhdedup.judge.judge` sees.

* :class:`EsLookups`: the realtime ``GET`` of ``_id = content hash`` (exact repeats, flushed by any
  writer, refreshed or not) and the near search (``bool/should`` over the band keys and the passage
  keys, Hamming-verified by the shared :class:`~scrapy_zhdedup.judge.NearRule`).
* :class:`EsAnswers`: the :class:`~scrapy_zhdedup.judge.Store` of one judgement: Elasticsearch's
  answers plus the batches of this process that searches cannot see yet (buffer.py); ``remember``
  hands the verdict back to the backend to enqueue.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from elasticsearch import NotFoundError

from scrapy_zhdedup.bands import BandLayout
from scrapy_zhdedup.fingerprint import hamming
from scrapy_zhdedup.judge import Match, NearRule, Prepared, Verdict, closest
from scrapy_zhdedup.passages import votes_needed

from .buffer import BulkBuffer
from .steps import Call, Steps
from .writer import EsStats, RetryPolicy

SEARCH_PAGE = 100  # candidates per search page, most shared keys first
MAX_QUERY_PASSAGES = 512  # passage keys used per document: bounded bool clauses (max_clause_count)
MAX_RESULT_WINDOW = 10_000  # Elasticsearch's default cap on from + size
_SOURCE = ["zhdedup.doc_id", "zhdedup.cluster", "zhdedup.fp", "zhdedup.seen_at"]
FLUSHED_AGE = 0  # age rank of a document Elasticsearch holds: older than anything still buffered


def near_query(layout: BandLayout, fp: int, passages: Sequence[int] = (), passage_share: float = 0.2) -> dict[str, Any]:
    """Candidates: documents sharing a band key with ``fp`` (named ``bands``), or sharing enough of
    ``passages`` (named ``passages``); score = number of shared keys, so near pairs come first.
    """
    query = {"bool": {"should": [
        {"constant_score": {"filter": {"term": {f"zhdedup.{name}": value}}}} for name, value in layout.terms(fp).items()
    ], "minimum_should_match": 1, "_name": "bands"}}
    if not passages:
        return query
    keys = [format(key, "08x") for key in passages]
    passage_clause = {"bool": {"should": [{"constant_score": {"filter": {"term": {"zhdedup.passages": key}}}}
                                          for key in keys],
                               "minimum_should_match": votes_needed(len(keys), passage_share), "_name": "passages"}}
    return {"bool": {"should": [query, passage_clause], "minimum_should_match": 1}}


def repeat_id(content_hash: str, doc_id: str) -> str:
    """``_id`` of an exact repeat kept in annotate mode (the first copy owns ``_id = content_hash``)."""
    return f"{content_hash}-{hashlib.sha1(doc_id.encode('utf-8')).hexdigest()[:16]}"


@dataclass
class EsLookups:
    index: str
    layout: BandLayout
    rule: NearRule
    policy: RetryPolicy
    stats: EsStats

    def exact(self, digest: str) -> Steps:
        """Steps: the first copy of this text, by realtime GET (sees flushed documents before any refresh)."""
        self.stats.inc("lookups")
        try:
            response = yield from self.policy.call(
                lambda c: c.get(index=self.index, id=digest, source_includes=_SOURCE[:2]), self.stats)
        except NotFoundError:
            return None
        z = response["_source"]["zhdedup"]
        return Match(z["doc_id"], z["cluster"], 0)

    def near(self, fp: int, passages: list[int]) -> Steps:
        """Steps: the candidate the rule accepts and prefers, from the first page that has one."""
        query = near_query(self.layout, fp, passages, self.rule.passage_share)
        offset = 0
        while offset < MAX_RESULT_WINDOW:
            self.stats.inc("lookups")
            response = yield from self.policy.call(self._search(query, offset), self.stats)
            hits = response["hits"]["hits"]
            accepted = []
            for hit in hits:
                z = hit["_source"]["zhdedup"]
                distance = hamming(int(z["fp"], 16), fp)
                # each matched passage clause scores 1, reported by include_named_queries_score
                matched = hit.get("matched_queries", {})
                limit = self.rule.limit("bands" in matched, round(matched.get("passages", 0)), len(passages))
                if distance <= limit:
                    accepted.append((distance, (FLUSHED_AGE, z.get("seen_at", "")),
                                     Match(z["doc_id"], z["cluster"], distance)))
            best = closest(accepted)
            if best is not None or len(hits) < SEARCH_PAGE:
                return best
            offset += SEARCH_PAGE
        return None

    def _search(self, query: dict[str, Any], offset: int) -> Call:
        return lambda client: client.search(
            index=self.index, query=query, size=SEARCH_PAGE, from_=offset, source_includes=_SOURCE,
            track_total_hits=False, include_named_queries_score=True)


@dataclass
class EsAnswers:
    """The :class:`~scrapy_zhdedup.judge.Store` of one judgement: what Elasticsearch answered when the
    lookups ran, plus the pending batches as they are now (an equal or near text may have been
    buffered meanwhile)."""

    flushed_exact: Match | None
    flushed_near: Match | None
    buffer: BulkBuffer
    since: int  # first batch the Elasticsearch lookups could not see
    on_verdict: Callable[[Prepared, Verdict], None]

    def find_exact(self, digest: str) -> Match | None:
        return self.flushed_exact or self.buffer.exact(digest)

    def find_near(self, fingerprint: int, passages: Sequence[int], exclude: str | None = None) -> Match | None:
        """``exclude`` is never given here: :meth:`previous` knows no earlier verdicts."""
        flushed = [] if self.flushed_near is None else [
            (self.flushed_near.distance, (FLUSHED_AGE,), self.flushed_near)]
        return closest([*flushed, *self.buffer.near(fingerprint, query_passages(passages), self.since)])

    def previous(self, doc_id: str) -> Verdict | None:
        """Not kept by id on Elasticsearch: ``es ingest`` skips ids already stored instead."""
        return None

    def remember(self, prepared: Prepared, verdict: Verdict, match: Match | None) -> None:
        self.on_verdict(prepared, verdict)


def query_passages(passages: Sequence[int]) -> list[int]:
    """The passage keys that stand for a document on Elasticsearch (bounded clause count)."""
    return list(passages[:MAX_QUERY_PASSAGES])
