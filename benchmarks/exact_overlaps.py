"""The engine with its sketch replaced by exact overlaps: what a perfect sketch would decide.

The 64-bin sketch estimates each candidate's shingle Jaccard and containment; its error moves
verdicts near the rule's line both ways.  :class:`ExactOverlaps` measures how much by giving the rule
the exact values instead, in a benchmark process only (it keeps every text's shingles).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from unittest import mock

import numpy as np

from scrapy_zhdedup import engine
from scrapy_zhdedup.fingerprint import hamming
from scrapy_zhdedup.judge import Features
from scrapy_zhdedup.nearindex import Hit, NearIndex
from scrapy_zhdedup.sketch import SIZE, Overlap, Sketch, shingle_hashes


class ExactOverlaps:
    """Verification on exact overlaps: while :meth:`patched` is active, ``NearIndex.verify`` gives the
    rule each candidate's exact shingle Jaccard and containment, from every text's shingles kept here
    by the sketch they were sketched into, when both texts have at most ``up_to`` shingles (others are
    estimated as before).  Candidates, rule and choice stay the engine's."""

    def __init__(self, up_to: int | None = None) -> None:
        self.up_to = up_to
        self.shingles: dict[tuple[bytes, int], frozenset[int]] = {}

    @contextmanager
    def patched(self) -> Iterator[None]:
        sketch, estimated, table, up_to = engine.sketch, NearIndex.verify, self.shingles, self.up_to

        def recording(text: str) -> Sketch:
            s = sketch(text)
            table[s.values.tobytes(), s.shingles] = frozenset(shingle_hashes(text).tolist())
            return s

        def verify(index: NearIndex, features: Features, rows: list[int]) -> list[Hit]:
            mine = table[features.sketch.values.tobytes(), features.sketch.shingles]
            if up_to is not None:
                if len(mine) > up_to:
                    return estimated(index, features, rows)
                hits = estimated(index, features, [r for r in rows if index._shingles[r] > up_to])
                rows = [r for r in rows if index._shingles[r] <= up_to]
            else:
                hits = []
            values = np.frombuffer(index._values, dtype=np.uint16).reshape(-1, SIZE)
            for row in rows:
                theirs = table[values[row].tobytes(), index._shingles[row]]
                shared, smaller = len(mine & theirs), min(len(mine), len(theirs))
                score = index.rule.score(Overlap(shared / len(mine | theirs), shared / smaller, smaller))
                if score is not None:
                    hits.append(Hit(row, hamming(index.bands.fingerprint(row), features.fingerprint), score))
            return hits

        with mock.patch.object(engine, "sketch", recording), mock.patch.object(NearIndex, "verify", verify):
            yield
