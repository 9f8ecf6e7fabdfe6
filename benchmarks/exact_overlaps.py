"""The engine with its sketch's estimates replaced: by exact overlaps, or by another sketch's.

The 64-bin sketch estimates each candidate's shingle Jaccard and containment; its error moves
verdicts near the rule's line both ways.  :class:`ExactOverlaps` measures how much by giving the rule
other values for the same candidates: the exact ones (what a perfect sketch would decide), or those a
sketch of another size would estimate (:class:`SimulatedSketch`), in a benchmark process only (it
keeps every text's shingles).  Both stand in for parts of the engine: :func:`check` compares them with
the engine before a benchmark takes a figure with them (the ``recall``, ``cross_links`` and
``sketch_size`` benchmarks run it first).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from unittest import mock

import numpy as np

from benchmarks.common import expect
from scrapy_zhdedup.deduper import Deduper
from scrapy_zhdedup.index.nearindex import Hit, NearIndex
from scrapy_zhdedup.model import SKETCH_SIZE, Features, Sketch, rounded
from scrapy_zhdedup.similarity import fingerprinter
from scrapy_zhdedup.similarity.simhash import hamming
from scrapy_zhdedup.similarity.sketch import EMPTY, Overlap, estimate_many, shingle_hashes, sketch

Shingles = frozenset[int]
OverlapOf = Callable[[Shingles, Shingles], Overlap]


def exact(a: Shingles, b: Shingles) -> Overlap:
    """Jaccard and the share of the new text ``a`` inside the earlier ``b``, counted."""
    shared = len(a & b)
    return Overlap(shared / len(a | b), shared / len(a), len(a), len(b))


class SimulatedSketch:
    """What a one-permutation MinHash of ``bins`` bins of ``bits`` bits (the engine's construction and
    estimator, sketch.py) would estimate; 64 x 16 is the engine's own sketch."""

    def __init__(self, bins: int, bits: int) -> None:
        if bins & (bins - 1) or not 1 <= bits <= 16:
            raise ValueError(f"bins must be a power of two and bits 1..16, not {bins} x {bits}")
        self.bins, self.bits = bins, bits
        self._values: dict[Shingles, np.ndarray] = {}

    def values(self, shingles: Shingles) -> np.ndarray:
        """Per bin, the top ``bits`` bits of its smallest hash's offset in the bin; EMPTY where none fell."""
        found = self._values.get(shingles)
        if found is None:
            h = np.array(sorted(shingles), dtype=np.uint64)
            bin_bits = 32 - (self.bins.bit_length() - 1)
            bins = (h >> np.uint64(bin_bits)).astype(np.int64)
            first = np.ones(len(h), dtype=bool)
            first[1:] = bins[1:] != bins[:-1]
            offsets = (h[first] & np.uint64((1 << bin_bits) - 1)) >> np.uint64(max(0, bin_bits - self.bits))
            found = np.full(self.bins, EMPTY, dtype=np.uint16)
            found[bins[first]] = np.minimum(offsets, (1 << self.bits) - 2)
            self._values[shingles] = found
        return found

    def __call__(self, a: Shingles, b: Shingles) -> Overlap:
        return estimate_many(Sketch(self.values(a), len(a)), self.values(b)[None, :], np.array([len(b)]))[0]


class ExactOverlaps:
    """While :meth:`patched` is active, ``NearIndex.verify`` gives the rule ``overlap`` of each
    candidate's shingles and the text's (by default the exact values), from every text's shingles kept
    here by the sketch they were sketched into, when both texts have at most ``up_to`` shingles (others
    are estimated as before).  Candidates, rule and choice stay the engine's."""

    def __init__(self, up_to: int | None = None, overlap: OverlapOf = exact) -> None:
        self.up_to, self.overlap = up_to, overlap
        self.shingles: dict[tuple[bytes, int], Shingles] = {}

    @contextmanager
    def patched(self) -> Iterator[None]:
        sketch, estimated, table, up_to, overlap = (fingerprinter.sketch_of_hashes, NearIndex.verify, self.shingles,
                                                    self.up_to, self.overlap)

        def recording(hashes: np.ndarray) -> Sketch:
            s = sketch(hashes)
            table[s.values.tobytes(), s.shingles] = frozenset(hashes.tolist())
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
            values = np.frombuffer(index._values, dtype=np.uint16).reshape(-1, SKETCH_SIZE)
            for row in rows:
                o = overlap(mine, table[values[row].tobytes(), index._shingles[row]])
                why = index.rule.reason(o)
                if why is not None:
                    hits.append(Hit(row, hamming(index.bands.fingerprint(row), features.fingerprint), o.jaccard,
                                    o.contained, why))
            return hits

        with mock.patch.object(fingerprinter, "sketch_of_hashes", recording), mock.patch.object(NearIndex, "verify", verify):
            yield


def check() -> None:
    """On a real article and an edited copy: a simulated 128 x 16 sketch is the engine's own, values and
    estimate, and another size is not; under :meth:`ExactOverlaps.patched` the engine's verdict carries
    the exact overlap of the two texts' shingles."""
    from corpora.corpus import load_base

    text = load_base(limit=1)[0].text[:300]
    copy = text[40:] + "(某某网)"
    later, earlier = (frozenset(shingle_hashes(t).tolist()) for t in (copy, text))
    simulated, engine = SimulatedSketch(128, 16), sketch(text)
    expect(bool((simulated.values(earlier) == engine.values).all()), "a simulated 128 x 16 sketch is not the engine's")
    expect(simulated(later, earlier) == estimate_many(sketch(copy), engine.values[None, :], np.array([engine.shingles]))[0],
           "a simulated 128 x 16 sketch does not estimate as the engine does")
    expect(SimulatedSketch(256, 8)(later, earlier) != simulated(later, earlier), "a 256 x 8 sketch estimates as 128 x 16")
    edited = "".join("某" if i % 40 == 7 else c for i, c in enumerate(text)) + "(某某网)"
    deduper = Deduper()
    clean = deduper.fingerprinter.clean
    truth = exact(*(frozenset(shingle_hashes(clean(text=t)).tolist()) for t in (edited, text)))
    with ExactOverlaps().patched():
        deduper.judge("a", text=text)
        verdict = deduper.judge("b", text=edited)
    expect(verdict.dup_of == "a" and (verdict.similarity, verdict.contained) == (rounded(truth.jaccard),
                                                                                   rounded(truth.contained)),
           f"ExactOverlaps: {verdict} does not carry the exact overlap {truth}")
