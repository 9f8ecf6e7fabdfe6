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
* :class:`NearRule` says when a candidate counts (by the estimated overlap of the sketches: Jaccard,
  or containment of the smaller text) and :func:`closest` which one wins (the largest overlap, then
  the oldest), for every store.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, Protocol, TypeVar

from .sketch import Overlap, Sketch, band_keys

if TYPE_CHECKING:
    from .engine import Fingerprinter

Status = Literal["unique", "exact", "near"]
Rerun = Literal["same", "changed"]
T = TypeVar("T")


@dataclass(frozen=True)
class Match:
    """An earlier document that the one being judged repeats."""

    doc_id: str
    cluster: str
    distance: int
    similarity: float = 1.0  # estimated overlap (sketch.py); 1.0 for an exact repeat
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
    similarity: float | None = None  # estimated overlap with dup_of, two decimals (None if unique)

    @property
    def is_duplicate(self) -> bool:
        return self.status != "unique"

    def record(self) -> dict[str, Any]:
        """The ``zhdedup scan`` output line."""
        return {"id": self.doc_id, "status": self.status, "dup_of": self.dup_of, "distance": self.distance,
                "similarity": self.similarity}

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def verdict_for(doc_id: str, content_hash: str, fingerprint: int | None, match: Match | None,
                exact: bool = False, rerun: Rerun | None = None) -> Verdict:
    """The one place a match becomes a verdict."""
    if match is None:
        return Verdict(doc_id, "unique", None, None, doc_id, content_hash, fingerprint, rerun)
    return Verdict(doc_id, "exact" if exact else "near", match.doc_id, match.distance, match.cluster,
                   content_hash, fingerprint, rerun, 1.0 if exact else rounded(match.similarity))


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


@dataclass(frozen=True)
class NearRule:
    """When a candidate is a near repeat, from the estimated overlap of the two sketches: the same
    answer for every store.  Jaccard covers edited copies; containment covers a copy that is mostly
    inside the other (a new headline, a cut tail), once the smaller text is long enough for it."""

    similarity: float = 0.65  # estimated shingle Jaccard
    containment: float = 0.85  # estimated share of the smaller text's shingles inside the larger
    min_contained: int = 10  # shingles the smaller text needs before containment alone decides

    def score(self, overlap: Overlap) -> float | None:
        """The candidate's similarity if it is a near repeat (the larger of the two estimates that
        pass), else None."""
        contained = overlap.containment >= self.containment and overlap.smaller >= self.min_contained
        if overlap.jaccard < self.similarity and not contained:
            return None
        return max(overlap.jaccard, overlap.containment if contained else 0.0)


def closest(candidates: Iterable[tuple[float, Any, T]]) -> T | None:
    """The accepted candidate to report, from ``(similarity, age, candidate)``: the most similar,
    then the oldest (smallest age), then the first given."""
    best = min(candidates, key=lambda c: (-c[0], c[1]), default=None)
    return None if best is None else best[2]
