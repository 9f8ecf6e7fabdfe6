"""The one judging flow: prepared document → exact? → near? → remember → verdict.

Every place that decides (the embedded store, the Elasticsearch backend, ``es dedup-index``) runs
:func:`judge` against a :class:`Store`, so the order of the steps exists once:

* A :class:`~scrapy_zhdedup.model.Prepared` document is the pure part (similarity/fingerprinter.py);
  its features are computed here, by the caller's ``featurize``, only when the text is not an exact
  repeat (a worker process sends them computed).
* A :class:`Store` answers "which earlier document has this hash" and "which earlier document is
  near these features" (by the one near rule, similarity/rule.py), and remembers the verdict.
"""

from __future__ import annotations

import dataclasses
from typing import Protocol

from .model import Features, Featurize, Match, Prepared, Rerun, Verdict, verdict_for


class Store(Protocol):
    """What :func:`judge` needs from a place that remembers documents."""

    def find_exact(self, digest: str) -> Match | None:
        """The earlier document with this content hash, if any."""

    def find_near(self, features: Features, exclude: str | None = None) -> Match | None:
        """The earlier document :class:`~scrapy_zhdedup.similarity.rule.NearRule` accepts and
        :func:`~scrapy_zhdedup.similarity.rule.closest` prefers, if any (never one with the id
        ``exclude``: an earlier version of the document being judged)."""

    def previous(self, doc_id: str) -> Verdict | None:
        """The verdict this store last gave ``doc_id``, if it keeps verdicts by id (else None)."""

    def remember(self, prepared: Prepared, verdict: Verdict, match: Match | None) -> None:
        """Keep what later documents must be judged against (called for every verdict; the document
        carries its features unless it is an exact repeat)."""


def judge(prepared: Prepared, store: Store, featurize: Featurize | None = None) -> Verdict:
    """Exact repeats first (hash only), then near repeats (features, computed by ``featurize`` unless
    the document carries them), then remember.

    An id judged before is not a repeat of itself: with the same content it gets its stored verdict
    back and nothing changes (a rerun or a resumed run says what the first run said); with other
    content it is judged as a new version, against everything but its own earlier versions.
    """
    before = store.previous(prepared.doc_id)
    if before is not None and before.content_hash == prepared.digest:
        return dataclasses.replace(before, rerun="same")
    rerun: Rerun | None = None if before is None else "changed"
    match = store.find_exact(prepared.digest)
    if match is not None and match.doc_id != prepared.doc_id:
        verdict = verdict_for(prepared.doc_id, prepared.digest, None, match, exact=True, rerun=rerun)
    else:
        features = prepared.featured(featurize)
        match = store.find_near(features, exclude=prepared.doc_id if rerun else None)
        verdict = verdict_for(prepared.doc_id, prepared.digest, features.fingerprint, match, rerun=rerun)
    store.remember(prepared, verdict, match)
    return verdict
