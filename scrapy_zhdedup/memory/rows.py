"""The indexed documents of the memory of judged documents, one row each: originals and near repeats (never
exact repeats).

Per row: its near features (the near index), a 64-bit prefix of its content hash (exact lookups
that name the earlier document, behind the Bloom filter that answers most misses), the row of its
cluster's first document and its entry (entries.py).
"""

from __future__ import annotations

from array import array
from collections.abc import Mapping

import numpy as np

from ..index.bloom import ExactFilter
from ..index.multimap import KeyTable
from ..index.nearindex import CandidateKeys, NearIndex
from ..model import Features
from ..similarity.rule import NearRule
from .record import Record

ARRAYS = ("fingerprints", "sketches", "shingles", "sketch_keys", "sketch_rows", "passage_keys", "passage_rows")


def hash_key(content_hash: bytes) -> int:
    """The exact table's key: the content hash's first 64 bits."""
    return int.from_bytes(content_hash[:8], "big")


class Rows:
    """Near index, exact table, Bloom filter and cluster roots, kept in step row by row."""

    def __init__(self, keys: CandidateKeys, rule: NearRule, bloom: ExactFilter) -> None:
        self.near = NearIndex(keys, rule)
        self.bloom = bloom
        self.false_positives = 0  # Bloom hits the exact table did not confirm
        self._exact = KeyTable(np.uint64)
        self.roots = array("I")  # per row: row of the first document of its cluster
        self.entry = array("I")  # per row: its entry

    def __len__(self) -> int:
        return len(self.roots)

    def find_exact(self, content_hash: str) -> int | None:
        """The first row with this content hash, or None."""
        if content_hash not in self.bloom:
            return None
        rows = self._exact.get_many([hash_key(bytes.fromhex(content_hash[:16]))])
        if not rows:
            self.false_positives += 1
            return None
        return min(rows)

    def add(self, record: Record, features: Features, *, original: bool) -> None:
        """Index the row ``record`` adds (``features``: its near features)."""
        self.near.add(features, original=original)
        self.roots.append(record.root)
        self.entry.append(record.entry)
        self._exact.add_many([hash_key(record.content_hash)], record.row)
        self.bloom.add(record.content_hash.hex())

    def arrays(self) -> dict[str, np.ndarray]:
        """Views of the live arrays (not copies), for a snapshot (the Bloom filter is the store's to save)."""
        return {**self.near.arrays(), "roots": np.frombuffer(self.roots, dtype=np.uint32)}

    @classmethod
    def from_arrays(cls, keys: CandidateKeys, rule: NearRule, bloom: ExactFilter, data: Mapping[str, np.ndarray],
                    entries: np.ndarray, hashes: np.ndarray, originals: np.ndarray) -> Rows:
        """The rows a snapshot saved: ``entries`` the entry of each row, ``hashes`` its content hash
        (16 bytes a row), ``originals`` whether it is a candidate.  A ValueError if the arrays disagree."""
        rows = cls(keys, rule, bloom)
        rows.near = NearIndex.from_arrays(keys, rule, {name: data[name] for name in ARRAYS}, originals=originals)
        row_keys = hashes[:, :8].copy().view(">u8").ravel().astype(np.uint64)
        rows._exact = KeyTable.build(row_keys, np.arange(len(entries), dtype=np.uint32))
        rows.roots = array("I", data["roots"].astype(np.uint32).tobytes())
        rows.entry = array("I", entries.astype(np.uint32).tobytes())
        return rows
