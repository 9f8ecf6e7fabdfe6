"""A compact integer multimap: sorted numpy arrays plus a small dict of recent additions.

A Python dict of lists costs ~100 bytes per entry; sorted ``(key, row)`` arrays cost 8-12.
New entries go to a dict and are merged into the arrays once the dict holds more than an
eighth of the total, so the merge (a sort) is amortised to O(log n) per insertion.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

_MIN_PENDING = 4096
_PENDING_ENTRY_BYTES = 100  # dict slot + list + int objects, measured with tracemalloc


class KeyTable:
    def __init__(self, key_dtype: type[np.unsignedinteger]) -> None:
        self._dtype = np.dtype(key_dtype)
        self._keys = np.empty(0, dtype=self._dtype)
        self._rows = np.empty(0, dtype=np.uint32)
        self._pending: dict[int, list[int]] = {}
        self._pending_count = 0

    def __len__(self) -> int:
        return len(self._rows) + self._pending_count

    def add_many(self, keys: Iterable[int], row: int) -> None:
        for key in keys:
            self._pending.setdefault(key, []).append(row)
            self._pending_count += 1
        if self._pending_count > max(_MIN_PENDING, len(self._rows) >> 3):
            self.compact()

    def get_many(self, keys: list[int], limit: int | None = None) -> list[int]:
        """Rows stored under any of ``keys`` (a row repeats once per key it is under).

        Keys holding more than ``limit`` rows are skipped: a key that common (a site's
        boilerplate sentence) says nothing about which document is repeated.
        """
        # One search for all keys, then a second only for the keys present (most are not); the array
        # methods, not np.searchsorted/np.nonzero, whose dispatch costs more than a small search.
        # The query array must carry the table's dtype, or numpy casts the whole table on every call.
        found: list[int] = []
        pending = self._pending
        stored = self._keys
        held: dict[int, int] = {}  # position in keys -> rows the arrays hold under it
        if len(stored):
            query = np.array(keys, dtype=self._dtype)
            lo = stored.searchsorted(query)
            hit = (stored[lo.clip(max=len(stored) - 1)] == query).nonzero()[0]
            if len(hit):
                ends = stored.searchsorted(query[hit], side="right").tolist()
                for i, start, end in zip(hit.tolist(), lo[hit].tolist(), ends):
                    held[i] = end - start
                    if limit is None or end - start + len(pending.get(keys[i], ())) <= limit:
                        found.extend(self._rows[start:end].tolist())
        if pending:
            for j, key in enumerate(keys):
                rows = pending.get(key)
                if rows and (limit is None or len(rows) + held.get(j, 0) <= limit):
                    found.extend(rows)
        return found

    def compact(self) -> None:
        """Merge pending entries into the sorted arrays (stable, so rows stay oldest first)."""
        if not self._pending:
            return
        keys = np.fromiter((k for k, rows in self._pending.items() for _ in rows), dtype=self._dtype)
        rows = np.fromiter((r for rs in self._pending.values() for r in rs), dtype=np.uint32)
        self._set(np.concatenate([self._keys, keys]), np.concatenate([self._rows, rows]))
        self._pending.clear()
        self._pending_count = 0

    def _set(self, keys: np.ndarray, rows: np.ndarray) -> None:
        order = np.lexsort((rows, keys))
        self._keys, self._rows = keys[order], rows[order]

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """All ``(keys, rows)`` pairs, sorted by key: what a store saves to rebuild the table."""
        self.compact()
        return self._keys, self._rows

    @classmethod
    def build(cls, keys: np.ndarray, rows: np.ndarray) -> KeyTable:
        """Bulk load (one sort) instead of n incremental inserts."""
        table = cls(keys.dtype.type)
        table._set(keys, rows.astype(np.uint32))
        return table

    def nbytes(self) -> int:
        return self._keys.nbytes + self._rows.nbytes + self._pending_count * _PENDING_ENTRY_BYTES
