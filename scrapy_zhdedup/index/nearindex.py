"""Near-repeat candidates by exact key lookups, verified on the sketches: the one in-memory index.

Keys name candidates, never a pairwise scan (:class:`CandidateKeys` says which):

* the MinHash band keys (sketch.py): texts whose character shingles overlap, through scattered
  edits, re-templating and length change;
* the SimHash band keys (bandindex.py, when on): every earlier text within ``k`` bits;
* passage keys (passages.py, when on): texts sharing enough sentence runs.

A key held by more than ``MAX_POSTINGS`` documents is boilerplate (a site's footer, a stock
clause), not evidence, and is skipped.  Every candidate is then decided by one
:class:`~scrapy_zhdedup.similarity.rule.NearRule` on the estimated overlap of the two sketches.  The embedded
store, Elasticsearch's not-yet-searchable buffer, ``dedup-index`` and ``reconcile`` all use it.

Only a cluster's original carries keys, so only originals are candidates: a text joins a cluster by
repeating its original, never through a chain of repeats that drift away from it (a repost of a
repost of a repost), and what a text is compared with is what ``drop`` mode delivered.
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ..config import DedupConfig
from ..model import SKETCH_SIZE, Features, Reason
from ..similarity.passages import votes_needed
from ..similarity.rule import NearRule, closest
from .bandindex import BandIndex
from .bands import BandLayout
from .multimap import KeyTable

MAX_POSTINGS = 64  # a key in more documents than this is boilerplate, not evidence


class Hit(NamedTuple):
    row: int
    distance: int  # SimHash Hamming distance (reported, never decides)
    similarity: float  # estimated shingle Jaccard
    contained: float  # estimated share of the judged text inside this row's
    reason: Reason


@dataclass(frozen=True)
class CandidateKeys:
    """Which keys name a text's candidates: always the sketch keys; the SimHash band keys of
    ``layout`` only when ``simhash_bands`` is on (on every benchmark set they named no repeat the
    sketch keys missed, and on a 1M-document Elasticsearch index they were ~30 % of the node's CPU
    per near search); passages whenever the texts carry them (``passage_share`` of them shared).
    Switching the bands on needs no rebuild: Elasticsearch documents always carry their band keys
    (``layout``), and the embedded store builds its band tables from the saved fingerprints on load."""

    layout: BandLayout
    simhash_bands: bool = False
    passage_share: float = 0.2

    @classmethod
    def from_config(cls, config: DedupConfig) -> CandidateKeys:
        """The keys the settings give (``ZHDEDUP_SIMHASH_BANDS``, ``ZHDEDUP_PASSAGE_SHARE``, the band layout)."""
        return cls(BandLayout.from_config(config), config.simhash_bands, config.passage_share)


class NearIndex:
    def __init__(self, keys: CandidateKeys, rule: NearRule) -> None:
        self.keys, self.rule = keys, rule
        self.bands = BandIndex(keys.layout, keyed=keys.simhash_bands)
        self.sketch_keys = KeyTable(np.uint32)
        self.passages = KeyTable(np.uint32)
        self._values = array("H")  # SKETCH_SIZE per row
        self._shingles = array("I")

    def __len__(self) -> int:
        return len(self.bands)

    def add(self, features: Features, original: bool = True) -> int:
        """Keep a document's sketch and fingerprint; returns its row (rows are dense, in insertion order).
        Only an ``original`` (the first of its cluster) gets keys, so only originals are candidates."""
        row = self.bands.add(features.fingerprint, keyed=original)
        if original:
            self.sketch_keys.add_many(features.sketch_keys, row)
            if features.passages:
                self.passages.add_many(features.passages, row)
        self._values.frombytes(features.sketch.values.astype(np.uint16, copy=False).tobytes())  # 0.3 µs; tolist(): 7
        self._shingles.append(min(features.sketch.shingles, 0xFFFF_FFFF))
        return row

    def candidates(self, features: Features) -> list[int]:
        """Rows named by any key in use: sketch keys, SimHash bands, enough shared passages."""
        rows = set(self.sketch_keys.get_many(features.sketch_keys, limit=MAX_POSTINGS))
        if self.keys.simhash_bands:
            rows.update(self.bands.candidates(features.fingerprint))
        if features.passages:
            votes = Counter(self.passages.get_many(features.passages, limit=MAX_POSTINGS))
            needed = votes_needed(len(features.passages), self.keys.passage_share)
            rows.update(row for row, n in votes.items() if n >= needed)
        return sorted(rows)

    def nearest(self, features: Features, exclude: Collection[int] = ()) -> Hit | None:
        """The candidate the rule accepts with the largest similarity (the oldest on ties), if any."""
        rows = [row for row in self.candidates(features) if row not in exclude]
        return closest((hit.similarity, hit.row, hit) for hit in self.verify(features, rows))

    def verify(self, features: Features, rows: list[int]) -> list[Hit]:
        """The ``rows`` (sorted, distinct) the rule accepts, with what the verdict reports."""
        if not rows:
            return []
        idx = np.array(rows, dtype=np.int64)
        values = np.frombuffer(self._values, dtype=np.uint16).reshape(-1, SKETCH_SIZE)[idx]
        shingles = np.frombuffer(self._shingles, dtype=np.uint32)[idx]
        fingerprints = [self.bands.fingerprint(row) for row in rows]
        return [Hit(rows[a.position], a.distance, a.similarity, a.contained, a.reason)
                for a in self.rule.accept(features, values, shingles, fingerprints)]

    def arrays(self) -> dict[str, np.ndarray]:
        """What a snapshot saves to rebuild the index (:meth:`from_arrays`); the sketches are views of the
        live arrays (no copy), to be dropped before the index grows again (an array exporting its buffer
        cannot)."""
        sketch_keys, sketch_rows = self.sketch_keys.arrays()
        passage_keys, passage_rows = self.passages.arrays()
        return {"fingerprints": self.bands.fingerprints(),
                "sketches": np.frombuffer(self._values, dtype=np.uint16).reshape(-1, SKETCH_SIZE),
                "shingles": np.frombuffer(self._shingles, dtype=np.uint32),
                "sketch_keys": sketch_keys, "sketch_rows": sketch_rows,
                "passage_keys": passage_keys, "passage_rows": passage_rows}

    @classmethod
    def from_arrays(cls, keys: CandidateKeys, rule: NearRule, data: dict[str, np.ndarray],
                    originals: np.ndarray) -> NearIndex:
        """Bulk build from :meth:`arrays` (one sort per table) and which rows are ``originals`` (bool per
        row: they get band keys); ValueError if they do not fit together."""
        rows = len(data["fingerprints"])
        sketches = np.ascontiguousarray(data["sketches"], dtype=np.uint16)
        if sketches.shape != (rows, SKETCH_SIZE) or len(data["shingles"]) != rows or len(originals) != rows or any(
                len(data[f"{kind}_keys"]) != len(data[f"{kind}_rows"])
                or (len(data[f"{kind}_rows"]) and int(data[f"{kind}_rows"].max()) >= rows)
                for kind in ("sketch", "passage")):
            raise ValueError("fingerprint, sketch and key arrays do not fit together")
        index = cls(keys, rule)
        index.bands = BandIndex.from_fingerprints(keys.layout, data["fingerprints"], keyed=keys.simhash_bands,
                                                  rows_keyed=originals)
        index.sketch_keys = KeyTable.build(data["sketch_keys"].astype(np.uint32, copy=False), data["sketch_rows"])
        index.passages = KeyTable.build(data["passage_keys"].astype(np.uint32, copy=False), data["passage_rows"])
        index._values.frombytes(sketches.view(np.uint8).data)  # from the loaded array itself: tobytes() was one more copy
        index._shingles.frombytes(np.ascontiguousarray(data["shingles"], dtype=np.uint32).view(np.uint8).data)
        return index

