"""Near-duplicate index over 64-bit fingerprints: band keys for candidates, popcount to verify.

Never pairwise: a lookup touches only the rows that share a band key with the query.
All band tables live in one :class:`KeyTable` (keys prefixed by table number), so a lookup
is two vectorised binary searches whatever the number of tables.
"""

from __future__ import annotations

from array import array
from typing import NamedTuple

import numpy as np

from .bands import BandLayout
from .multimap import KeyTable


class Hit(NamedTuple):
    row: int
    distance: int


class BandIndex:
    def __init__(self, layout: BandLayout, keyed: bool = True) -> None:
        """``keyed=False`` keeps only the fingerprints (rows and distances), no band keys: for an index
        whose candidates come from other keys, at ~80 B and ~16 µs less per document."""
        self.layout, self.keyed = layout, keyed
        self._fps = array("Q")
        self._table = KeyTable(self._key_dtype(layout))

    @staticmethod
    def _key_dtype(layout: BandLayout) -> type[np.unsignedinteger]:
        return np.uint32 if layout.key_bits + layout.table_bits <= 32 else np.uint64

    def __len__(self) -> int:
        return len(self._fps)

    def fingerprint(self, row: int) -> int:
        return self._fps[row]

    def fingerprints(self) -> np.ndarray:
        return np.frombuffer(self._fps, dtype=np.uint64).copy()

    def add(self, fp: int, keyed: bool = True) -> int:
        """Keep ``fp``, with its band keys unless ``keyed`` is False (a row that is never a candidate);
        returns its row number (rows are dense, in insertion order)."""
        row = len(self._fps)
        self._fps.append(fp)
        if self.keyed and keyed:
            self._table.add_many(self.layout.table_keys(fp), row)
        return row

    def candidates(self, fp: int) -> list[int]:
        """Rows sharing a band key with ``fp``: every row within ``k``, and a few beyond."""
        if not self.keyed:
            raise ValueError("this band index keeps no band keys (keyed=False)")
        return self._table.get_many(self.layout.table_keys(fp))

    def distances(self, rows: list[int], fp: int) -> tuple[np.ndarray, np.ndarray]:
        """``rows`` sorted without repeats, and the Hamming distance of each to ``fp``."""
        rows_arr = np.unique(np.array(rows, dtype=np.int64))
        view = np.frombuffer(self._fps, dtype=np.uint64)
        dist = np.bitwise_count(view[rows_arr] ^ np.uint64(fp))
        del view  # a live buffer view would forbid appending to the array
        return rows_arr, dist

    def nearest(self, fp: int) -> Hit | None:
        """Closest indexed fingerprint within ``k`` found through the band keys."""
        return self.closest(self.candidates(fp), fp, self.layout.k)

    def closest(self, rows: list[int], fp: int, max_distance: int) -> Hit | None:
        """Closest of ``rows`` to ``fp`` within ``max_distance``; ties go to the oldest row."""
        if not rows:
            return None
        rows_arr, dist = self.distances(rows, fp)
        ok = np.flatnonzero(dist <= max_distance)
        if not len(ok):
            return None
        best = ok[np.argmin(dist[ok])]  # argmin takes the first minimum: the oldest row
        return Hit(int(rows_arr[best]), int(dist[best]))

    def compact(self) -> None:
        self._table.compact()

    @classmethod
    def from_fingerprints(cls, layout: BandLayout, fps: np.ndarray, keyed: bool = True,
                          rows_keyed: np.ndarray | None = None) -> BandIndex:
        """Bulk build with one sort, used when a saved store is loaded; ``rows_keyed`` (bool per row, default
        all) says which rows get band keys."""
        index = cls(layout, keyed)
        fps = np.ascontiguousarray(fps, dtype=np.uint64)
        index._fps.frombytes(fps.view(np.uint8).data)
        if not keyed:
            return index
        rows_of = np.arange(len(fps), dtype=np.uint32)
        if rows_keyed is not None:
            rows_of = rows_of[rows_keyed]
        keys = layout.table_keys_array(fps[rows_of])
        rows = np.repeat(rows_of, keys.shape[1])
        index._table = KeyTable.build(keys.ravel().astype(cls._key_dtype(layout)), rows)
        return index

    def nbytes(self) -> int:
        return self._fps.itemsize * len(self._fps) + self._table.nbytes()
