"""The data every layer passes on: a prepared document, its features, a match, a verdict.

A leaf: it imports nothing of this package, so cleaning, similarity, indexes, stores, the Scrapy
side and Elasticsearch all speak of documents in these terms without depending on each other.

* :class:`Prepared` is one document ready to judge: its clean text and content hash, and its
  :class:`Features` once computed (never for an exact repeat: those are not segmented).
* :class:`Features` are what near lookups use: the SimHash (the reported distance), the MinHash
  :class:`Sketch` and its band keys, and passage keys when they are on (similarity/).
* :class:`Match` is an earlier document a store found; :func:`verdict_for` makes the one
  :class:`Verdict` of it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

import numpy as np

Status = Literal["unique", "exact", "near"]
Reason = Literal["exact", "similar", "contained"]  # what made a repeat: same text, overlap, inside the earlier
REASONS: tuple[Reason, ...] = ("exact", "similar", "contained")
Rerun = Literal["same", "changed"]
SKETCH_SIZE = 128  # bins (values) per sketch: similarity/sketch.py says why
SKETCH_BYTES = 2 * SKETCH_SIZE + 4  # serialised: the values, then the shingle count (u32)


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


class Sketch(NamedTuple):
    """A text's MinHash sketch (made by similarity/sketch.py), as stores keep and send it."""

    values: np.ndarray  # uint16[SKETCH_SIZE], 0xFFFF for empty bins
    shingles: int  # distinct shingles in the text (which of two texts is the smaller)

    def to_bytes(self) -> bytes:
        return self.values.astype("<u2").tobytes() + min(self.shingles, 0xFFFF_FFFF).to_bytes(4, "little")

    @classmethod
    def from_bytes(cls, data: bytes) -> Sketch:
        if len(data) != SKETCH_BYTES:
            raise ValueError(f"a sketch is {SKETCH_BYTES} bytes, not {len(data)}")
        return cls(np.frombuffer(data, dtype="<u2", count=SKETCH_SIZE).astype(np.uint16),
                   int.from_bytes(data[-4:], "little"))


class Features(NamedTuple):
    """What near lookups use; computed only for texts that are not exact repeats."""

    fingerprint: int  # SimHash: the document fingerprint and the reported distance
    passages: list[int]  # passage keys (passages.py), empty unless passages are on
    sketch: Sketch  # MinHash sketch (sketch.py): verifies candidates
    sketch_keys: list[int]  # its LSH band keys: finds candidates


Featurize = Callable[[str], Features]  # clean text → its features (similarity/fingerprinter.py)


@dataclass(frozen=True)
class Prepared:
    """One document ready to judge: cleaned and hashed, touching no store (similarity/fingerprinter.py).

    Its features are computed when first needed, by whoever judges it (:meth:`featured`), or for a
    batch of documents together (``Fingerprinter.featured``: what workers.py's pool does for every chunk,
    in this process or in a worker process, before the documents are judged or sent back); they travel
    with it (it pickles with whatever was computed).
    """

    doc_id: str
    clean: str  # normalised: what is hashed and fingerprinted
    digest: str  # content hash of ``clean``
    written: str  # the text as the page wrote it (script, width, punctuation): what Elasticsearch stores
    features: Features | None = field(default=None, repr=False, compare=False)  # None until computed

    def featured(self, featurize: Featurize | None) -> Features:
        """Its features: those it carries, else computed from its text by ``featurize`` and kept (the one
        field set after the document is made)."""
        features = self.features
        if features is None:
            if featurize is None:
                raise RuntimeError(f"features of {self.doc_id!r} were not computed before it was sent here")
            features = featurize(self.clean)
            object.__setattr__(self, "features", features)
        return features

    def without_text(self, featurize: Featurize, *, written: bool = False) -> Prepared:
        """This document with its features computed and its text dropped: what a process that only
        judges needs (``zhdedup scan``'s), and a tenth of what a worker would otherwise send back.
        ``written``: keep the text as written (what the Elasticsearch backend stores)."""
        return Prepared(self.doc_id, "", self.digest, self.written if written else "", self.featured(featurize))
