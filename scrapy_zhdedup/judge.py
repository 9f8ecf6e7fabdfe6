"""The one judging flow: prepared document → exact? → near? → remember → verdict.

Every place that decides (the embedded store, the Elasticsearch backend, ``es dedup-index``) runs
:func:`judge` against a :class:`Store`, so the order of the steps and the verdict rule exist once:

* :class:`Prepared` is the pure part (clean text and its content hash; fingerprint and passage
  keys only when asked for, so exact repeats are never segmented).  It pickles with whatever was
  computed, so another process can compute the features and send them back.
* A :class:`Store` answers "which earlier document has this hash" and "which earlier document is
  near this fingerprint", and remembers the verdict.
* :class:`Features` are what near lookups use: the SimHash (the reported distance), the MinHash
  sketch (sketch.py) and its band keys, and passage keys when they are on.
* :class:`NearRule` says when a candidate counts, from the estimated overlap of the sketches, and
  :meth:`NearRule.accept` is the one verification every store runs; :func:`closest` says which
  accepted candidate wins (the most similar, then the oldest).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, Protocol, TypeVar

import numpy as np

from .fingerprint import hamming
from .sketch import Overlap, Sketch, band_keys, estimate_many

if TYPE_CHECKING:
    from .engine import Fingerprinter

Status = Literal["unique", "exact", "near"]
Reason = Literal["exact", "similar", "contained"]  # what made a repeat: same text, overlap, inside the earlier
REASONS: tuple[Reason, ...] = ("exact", "similar", "contained")
Rerun = Literal["same", "changed"]
T = TypeVar("T")


@dataclass(frozen=True)
class Match:
    """An earlier document that the one being judged repeats."""

    doc_id: str
    cluster: str
    distance: int
    similarity: float = 1.0  # estimated shingle Jaccard (sketch.py); 1.0 for an exact repeat
    contained: float = 1.0  # estimated share of the judged text inside this document
    reason: Reason = "exact"
    row: int = field(default=-1, compare=False)
    verdict: Verdict | None = field(default=None, compare=False)  # its own, where the store returns it


@dataclass(frozen=True)
class Verdict:
    doc_id: str
    status: Status
    dup_of: str | None
    distance: int | None
    cluster: str
    content_hash: str
    fingerprint: int | None  # None for exact repeats: never computed
    rerun: Rerun | None = None  # the id was judged before: "same" content (stored verdict) or "changed"
    similarity: float | None = None  # estimated shingle Jaccard with dup_of, two decimals (None if unique)
    contained: float | None = None  # estimated share of this text inside dup_of, two decimals
    reason: Reason | None = None  # what made it a repeat of dup_of (None if unique)

    @property
    def is_duplicate(self) -> bool:
        return self.status != "unique"

    def record(self) -> dict[str, Any]:
        """The ``zhdedup scan`` output line."""
        return {"id": self.doc_id, "status": self.status, "dup_of": self.dup_of, "reason": self.reason,
                "similarity": self.similarity, "contained": self.contained, "distance": self.distance}


def verdict_for(doc_id: str, content_hash: str, fingerprint: int | None, match: Match | None,
                exact: bool = False, rerun: Rerun | None = None) -> Verdict:
    """The one place a match becomes a verdict."""
    if match is None:
        return Verdict(doc_id, "unique", None, None, doc_id, content_hash, fingerprint, rerun)
    if exact:
        return Verdict(doc_id, "exact", match.doc_id, match.distance, match.cluster, content_hash, fingerprint, rerun,
                       1.0, 1.0, "exact")
    return Verdict(doc_id, "near", match.doc_id, match.distance, match.cluster, content_hash, fingerprint, rerun,
                   rounded(match.similarity), rounded(match.contained), match.reason)


def rounded(similarity: float) -> float:
    """Similarity as reported and stored (two decimals), so a rerun prints what the first run did."""
    return round(similarity, 2)


class Features(NamedTuple):
    """What near lookups use; computed only for texts that are not exact repeats."""

    fingerprint: int  # SimHash: the document fingerprint and the reported distance
    passages: list[int]  # passage keys (passages.py), empty unless passages are on
    sketch: Sketch  # MinHash sketch (sketch.py): verifies candidates
    sketch_keys: list[int]  # its LSH band keys: finds candidates

    @classmethod
    def of(cls, fingerprint: int, passages: list[int], summary: Sketch) -> Features:
        """Features with the sketch's band keys derived from it (computed, or read back from a store)."""
        return cls(fingerprint, passages, summary, band_keys(summary))


@dataclass(frozen=True)
class Prepared:
    """One document ready to judge; made by :meth:`Fingerprinter.prepare`, which touches no store."""

    doc_id: str
    clean: str  # normalised: what is hashed and fingerprinted
    digest: str  # content hash of ``clean``
    written: str  # the text as the page wrote it (script, width, punctuation): what Elasticsearch stores
    fingerprinter: Fingerprinter | None = field(default=None, repr=False, compare=False)

    @cached_property
    def features(self) -> Features:
        """Computed on first use (cached, and pickled once computed)."""
        if self.fingerprinter is None:
            raise RuntimeError(f"features of {self.doc_id!r} were not computed before it was sent here")
        return self.fingerprinter.features(self.clean)

    @property
    def fingerprint(self) -> int:
        return self.features[0]

    @property
    def passages(self) -> list[int]:
        return self.features[1]

    def __getstate__(self) -> dict[str, Any]:
        """The fingerprinter (its caches) stays in its process; computed features travel."""
        return {**self.__dict__, "fingerprinter": None}

    def without_text(self, *, written: bool = False) -> Prepared:
        """This document with its features computed and its text dropped: what a process that only
        judges needs (``zhdedup scan``'s), and a tenth of what a worker would otherwise send back.
        ``written``: keep the text as written (what the Elasticsearch backend stores)."""
        copy = dataclasses.replace(self, clean="", written=self.written if written else "", fingerprinter=None)
        copy.__dict__["features"] = self.features  # the cached property, set on the frozen copy
        return copy


class Store(Protocol):
    """What :func:`judge` needs from a place that remembers documents."""

    def find_exact(self, digest: str) -> Match | None:
        """The earlier document with this content hash, if any."""

    def find_near(self, features: Features, exclude: str | None = None) -> Match | None:
        """The earlier document :class:`NearRule` accepts and :func:`closest` prefers, if any
        (never one with the id ``exclude``: an earlier version of the document being judged)."""

    def previous(self, doc_id: str) -> Verdict | None:
        """The verdict this store last gave ``doc_id``, if it keeps verdicts by id (else None)."""

    def remember(self, prepared: Prepared, verdict: Verdict, match: Match | None) -> None:
        """Keep what later documents must be judged against (called for every verdict)."""


def judge(prepared: Prepared, store: Store) -> Verdict:
    """Exact repeats first (hash only), then near repeats (features), then remember.

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
        match = store.find_near(prepared.features, exclude=prepared.doc_id if rerun else None)
        verdict = verdict_for(prepared.doc_id, prepared.digest, prepared.fingerprint, match, rerun=rerun)
    store.remember(prepared, verdict, match)
    return verdict


class Accepted(NamedTuple):
    """A candidate the rule accepts: its position among those verified, and what the verdict reports."""

    position: int
    similarity: float
    contained: float
    reason: Reason
    distance: int  # SimHash Hamming distance: reported, never decides


@dataclass(frozen=True)
class NearRule:
    """When a candidate is a near repeat of the earlier document, from the estimated overlap of the two
    sketches: the same answer for every store.

    Directed, because a repeat is what a reader of the earlier document would learn little from:

    * *similar*: shingle Jaccard ≥ ``similarity`` (an edited copy, another site's template);
    * *contained*: ≥ ``containment`` of the new text is inside the earlier one, and the new text is at
      least ``min_share`` of its length (a cut copy, a copy with a new headline or source line).

    A later text that embeds or extends a shorter earlier one (an article ending with a known
    disclaimer, a provision quoting a stock clause) has much of its own, so it is neither.  A text of
    fewer than ``min_shingles`` shingles is a near repeat only of the same words (punctuation, width or
    spacing changed): one changed character of a 10-character headline (深市 → 沪市) is another fact.
    """

    similarity: float = 0.68  # estimated shingle Jaccard
    containment: float = 0.85  # estimated share of the new text inside the earlier one
    min_share: float = 0.5  # a contained text is at least this share of the earlier text's shingles
    min_shingles: int = 10

    def reason(self, overlap: Overlap) -> Reason | None:
        """Why the new text repeats the earlier one, or None if it does not."""
        if overlap.shingles < self.min_shingles:
            return "similar" if overlap.jaccard >= 1.0 else None
        if overlap.jaccard >= self.similarity:
            return "similar"
        if overlap.contained >= self.containment and overlap.shingles >= self.min_share * overlap.other:
            return "contained"
        return None

    def accept(self, features: Features, values: np.ndarray, shingles: np.ndarray,
               fingerprints: Sequence[int]) -> list[Accepted]:
        """The verification every store runs: which of the earlier sketches (``values``: uint16[n, SIZE],
        with their shingle counts and fingerprints) the new text repeats."""
        if not len(values):
            return []
        out = []
        for i, overlap in enumerate(estimate_many(features.sketch, values, shingles)):
            why = self.reason(overlap)
            if why is not None:
                out.append(Accepted(i, overlap.jaccard, overlap.contained, why,
                                    hamming(fingerprints[i], features.fingerprint)))
        return out


def closest(candidates: Iterable[tuple[float, Any, T]]) -> T | None:
    """The accepted candidate to report, from ``(similarity, age, candidate)``: the most similar,
    then the oldest (smallest age), then the first given."""
    best = min(candidates, key=lambda c: (-c[0], c[1]), default=None)
    return None if best is None else best[2]
