"""The near rule: when a candidate the keys found is a near repeat, and which one is reported.

:class:`NearRule` decides from the estimated overlap of two sketches, and :meth:`NearRule.accept` is
the one verification every store runs (the embedded index, Elasticsearch's answers, its buffer,
``reconcile``); :func:`closest` says which accepted candidate wins (the most similar, then the oldest).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeVar

import numpy as np

from ..config import DedupConfig
from ..model import Features, Reason
from .simhash import hamming
from .sketch import Overlap, estimate_many

T = TypeVar("T")


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

    @classmethod
    def from_config(cls, config: DedupConfig) -> NearRule:
        """The rule the settings give (``ZHDEDUP_SIMILARITY``, ``ZHDEDUP_CONTAINMENT``)."""
        return cls(config.similarity, config.containment)

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
        """The verification every store runs: which of the earlier sketches (``values``: uint16[n, SKETCH_SIZE],
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
