"""What the backend asks Elasticsearch: :class:`EsLookups`, the realtime ``GET`` of ``_id = content
hash`` (exact repeats, flushed by any writer, refreshed or not) and the near search (``bool/should``
over the sketch keys, and the SimHash band and passage keys when in use: the keys of nearindex.py as
keyword fields; first an unranked ``terms`` search, which answers most texts at a fraction of the
cost), among cluster originals only (``zhdedup.status: unique``, as nearindex.py keys only
originals), each hit verified on its stored sketch by the shared
:meth:`~scrapy_zhdedup.similarity.rule.NearRule.accept`.
What a judgement makes of the answers is judging.py's (``EsAnswers``).

What they read of the stored ``zhdedup`` objects, and how they decode it, is document.py's.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from scrapy_zhdedup.index.nearindex import CandidateKeys
from scrapy_zhdedup.model import Features, Match
from scrapy_zhdedup.similarity.passages import votes_needed
from scrapy_zhdedup.similarity.rule import NearRule, closest

from ..errors import LookupItemError
from ..index.document import (
    CANDIDATE,
    CANDIDATE_KEYS,
    FIRST_COPY,
    PASSAGES,
    SKETCH_KEYS,
    STATUS,
    Stored,
    passage_terms,
    path,
    sketch_terms,
)
from ..operations import Call, Steps
from .retry import RETRY_STATUSES, RetryPolicy
from .stats import EsStats

# Candidates on the first search page, most shared keys first; each later page is twice the last.
# 10, not 20: on a live 1M-document index (20 segments) the node spends ~0.1 ms less per item reading
# stored sketches, and 3 of 808 near verdicts name another near document (benchmarks/README.md).
SEARCH_PAGE = 10
MAX_QUERY_PASSAGES = 512  # passage keys used per document: bounded bool clauses (max_clause_count)
MAX_RESULT_WINDOW = 10_000  # Elasticsearch's default cap on from + size
ORIGINALS = {"term": {STATUS: "unique"}}  # near candidates: a cluster's original only (nearindex.py)
# The unranked search is tried while fewer than this share of recent texts had a page of candidates
# or more; each batch moves the share by CROWDED_WEIGHT of the difference (about the last ten batches).
MAX_CROWDED = 0.5
CROWDED_WEIGHT = 0.1
FLUSHED_AGE = 0  # age rank of a document Elasticsearch holds: older than anything still buffered


def _shared(terms: list[tuple[str, str]], needed: int = 1) -> dict[str, Any]:
    """Documents holding at least ``needed`` of ``terms``; each shared term scores 1.  Not named
    (``_name``): naming makes the node match every named clause against every hit again (~0.3 ms a search)."""
    return {"bool": {"should": [{"constant_score": {"filter": {"term": {field: value}}}} for field, value in terms],
                     "minimum_should_match": needed}}


def near_query(keys: CandidateKeys, features: Features) -> dict[str, Any]:
    """Candidates (nearindex.py's keys): originals with a shared sketch key, a shared SimHash band key
    (when on), or enough shared passages; score = number of shared keys, so the likeliest pairs come
    first."""
    clauses = [_shared([(SKETCH_KEYS, key) for key in sketch_terms(features.sketch_keys)])]
    if keys.simhash_bands:
        terms = keys.layout.terms(features.fingerprint).items()
        clauses.append(_shared([(path(name), value) for name, value in terms]))
    if features.passages:
        passages = [(PASSAGES, key) for key in passage_terms(features.passages)]
        clauses.append(_shared(passages, votes_needed(len(passages), keys.passage_share)))
    return {"bool": {"should": clauses, "minimum_should_match": 1, "filter": [ORIGINALS]}}


def repeat_id(content_hash: str, doc_id: str) -> str:
    """``_id`` of an exact repeat kept in annotate mode (the first copy owns ``_id = content_hash``)."""
    return f"{content_hash}-{hashlib.sha1(doc_id.encode('utf-8')).hexdigest()[:16]}"


@dataclass
class EsLookups:
    index: str
    keys: CandidateKeys
    rule: NearRule
    policy: RetryPolicy
    stats: EsStats
    crowded: float = 0.0  # recent share of texts with a page of candidates or more (moving average)

    def exact(self, digests: Sequence[str]) -> Steps:
        """Steps: the first copy of each text (or None), by one realtime ``mget`` (sees flushed
        documents before any refresh)."""
        if not digests:
            return []
        self.stats.inc("lookups")
        response = yield from self.policy.call(
            lambda c: c.mget(index=self.index, ids=list(digests), source_includes=FIRST_COPY, realtime=True),
            self.stats, lambda r: not any("error" in doc for doc in r["docs"]))  # a shard not started yet
        found = []
        for doc in response["docs"]:
            if "error" in doc:
                raise LookupItemError(doc["error"])
            first = Stored.from_source(doc["_source"]) if doc.get("found") else None
            found.append(None if first is None else Match(first.doc_id, first.cluster, 0, verdict=first.verdict()))
        return found

    def near(self, features: Sequence[Features]) -> Steps:
        """Steps: for each document's features, the candidate the rule accepts and prefers,
        from the first page that has one.  One ``_msearch`` per round: every candidate of the documents
        that have a page of them at most (:meth:`_all_candidates`, unless SimHash bands or passages
        name candidates too), then the first ranked pages of the others, then the next pages of those
        whose page was full but had no accepted candidate.

        The first page is small: hits come most shared keys first, so a repeat is nearly always among
        the first few, and every hit fetched costs a stored-field read on the node and a sketch to
        verify here.  Later pages double, so a text without a repeat among thousands of candidates
        (common keys) needs a few rounds, not one per ``SEARCH_PAGE`` candidates."""
        answers: list[Match | None] = [None] * len(features)
        pending = list(range(len(features)))
        unranked = bool(features) and not self.keys.simhash_bands and not any(f.passages for f in features)
        skipped = unranked and self.crowded >= MAX_CROWDED  # then the ranked first pages tell whether it pays
        if unranked and not skipped:
            pending = yield from self._all_candidates(features, answers)
            self._observe(len(pending) / len(features))
        queries = {i: near_query(self.keys, features[i]) for i in pending}
        offset, size = 0, SEARCH_PAGE
        while pending and offset < MAX_RESULT_WINDOW:
            size = min(size, MAX_RESULT_WINDOW - offset)
            self.stats.inc("lookups")
            searches: list[dict[str, Any]] = []
            for i in pending:
                searches += [{"index": self.index}, {
                    "query": queries[i], "size": size, "from": offset, "_source": CANDIDATE,
                    "track_total_hits": False}]
            response = yield from self.policy.call(_msearch(searches), self.stats, _answered)
            unresolved, full = [], 0
            for i, result in zip(pending, response["responses"]):
                hits = _candidates(result)
                full += len(hits) == size
                answers[i] = self._accept(hits, features[i])
                if answers[i] is None and len(hits) == size:
                    unresolved.append(i)
            if skipped and offset == 0:
                self._observe(full / len(pending))
            pending, offset, size = unresolved, offset + size, 2 * size
        return answers

    def _observe(self, share: float) -> None:
        self.crowded += CROWDED_WEIGHT * (share - self.crowded)

    def _all_candidates(self, features: Sequence[Features], answers: list[Match | None]) -> Steps:
        """Steps: the answer of each document with at most ``SEARCH_PAGE`` candidates, from one unranked
        search each (a ``terms`` query, cut off after ``SEARCH_PAGE + 1`` hits); returns the others.

        Most texts share a sketch key with a few documents at most, and a ``terms`` query costs the node
        ~1/7 of the ranked ``bool`` (a query phase of 0.05 instead of 0.4 ms on a 3,000-document index of
        ten segments).  Ordered by shared keys as the ranked search orders them (Elasticsearch breaks
        equal scores by document order, and the sort is stable), the first page and so the answer are
        those of the ranked search; a text with more candidates is searched ranked, page by page.  Where
        most texts have more (``crowded``: sketch keys shared widely, as on a 1M-document index of mixed
        sentences, where 73 % did and the unranked search cost 10-20 % of the items/s), it is skipped
        until the ranked first pages say it would pay again; the answers are the same either way."""
        self.stats.inc("lookups")
        terms = [sketch_terms(f.sketch_keys) for f in features]
        searches: list[dict[str, Any]] = []
        for keys in terms:
            searches += [{"index": self.index}, {
                "query": {"bool": {"filter": [{"terms": {SKETCH_KEYS: keys}}, ORIGINALS]}}, "size": SEARCH_PAGE + 1,
                "_source": CANDIDATE_KEYS, "track_total_hits": False}]
        response = yield from self.policy.call(_msearch(searches), self.stats, _answered)
        more = []
        for i, (keys, result) in enumerate(zip(terms, response["responses"])):
            hits = _candidates(result)
            if len(hits) > SEARCH_PAGE:
                more.append(i)
                continue
            hits.sort(key=lambda hit: -_shared_keys(keys, hit))
            answers[i] = self._accept(hits, features[i])
        return more

    def _accept(self, hits: list[Stored], features: Features) -> Match | None:
        stored = [(hit, hit.sketch, hit.fp) for hit in hits if hit.sketch is not None and hit.fp is not None]
        if not stored:
            return None
        accepted = self.rule.accept(features, np.stack([sketch.values for _, sketch, _ in stored]),
                                    np.array([sketch.shingles for _, sketch, _ in stored]), [fp for _, _, fp in stored])
        return closest((a.similarity, (FLUSHED_AGE, stored[a.position][0].seen_at or ""),
                        Match(stored[a.position][0].doc_id, stored[a.position][0].cluster, a.distance, a.similarity,
                              a.contained, a.reason)) for a in accepted)


def _answered(response: Any) -> bool:
    """Whether every search of an ``_msearch`` answered from all its shards: a shard that failed (its node
    died during the fetch, which is not retried on another copy) leaves its documents out of the hits, and
    a near repeat found nowhere else would be judged unique."""
    return not any(_missed_shards(result) or result.get("status") in RETRY_STATUSES for result in response["responses"])


def _missed_shards(result: dict[str, Any]) -> int:
    """Shards of a search that did not answer: failed, or (OpenSearch, where a shard no node holds is not
    counted as failed) neither successful nor skipped."""
    shards = result.get("_shards", {})
    return max(shards.get("failed", 0), shards.get("total", 0) - shards.get("successful", 0) - shards.get("skipped", 0))


def _candidates(result: dict[str, Any]) -> list[Stored]:
    """The hits of one ``_msearch`` answer (originals: each has its object); raises the error it holds
    instead, or a shard's failure."""
    if "error" in result:
        raise LookupItemError(result["error"], result.get("status"))
    if _missed_shards(result):
        raise LookupItemError(result["_shards"].get("failures") or "no_shard_available: a shard did not answer", 503)
    return [stored for hit in result["hits"]["hits"] if (stored := Stored.from_source(hit["_source"])) is not None]


def _shared_keys(keys: list[str], hit: Stored) -> int:
    """The ranked search's score of ``hit``: one per query key it holds."""
    held = set(hit.mh)
    return sum(key in held for key in keys)


def _msearch(searches: list[dict[str, Any]]) -> Call:
    return lambda client: client.msearch(searches=searches)


def query_features(features: Features) -> Features:
    """The features that stand for a document on Elasticsearch (a bounded number of passage keys)."""
    return features._replace(passages=query_passages(features.passages))


def query_passages(passages: Sequence[int]) -> list[int]:
    """The passage keys that stand for a document on Elasticsearch (bounded clause count)."""
    return list(passages[:MAX_QUERY_PASSAGES])

