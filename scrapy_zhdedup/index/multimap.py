"""A compact integer multimap: sorted numpy arrays plus a small dict of recent additions.

A Python dict of lists costs ~100 bytes per entry; sorted ``(key, row)`` arrays cost 8-12.
New entries go to a dict and are merged into the arrays once the dict holds more than
1/``_PENDING_SHARE`` of the total.  The merge is linear (no sort of the table), so it stays
cheap when frequent, and the dict stays small: at an eighth it was ~12 bytes per entry, the
largest part of ``zhdedup scan``'s memory peak at 1M documents (benchmarks README).

Rows must be added in increasing order (row numbers are handed out in insertion order): then
a key's rows are oldest first without being sorted.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection

import numpy as np

_MIN_PENDING = 4096
_PENDING_SHARE = 32  # merge when pending entries exceed 1/32 of the table: ~3 bytes per entry at most


class KeyTable:
    def __init__(self, key_dtype: type[np.unsignedinteger]) -> None:
        self._dtype = np.dtype(key_dtype)
        self._keys = np.empty(0, dtype=self._dtype)
        self._rows = np.empty(0, dtype=np.uint32)
        self._pending: dict[int, list[int]] = {}
        self._pending_count = 0

    def __len__(self) -> int:
        return len(self._rows) + self._pending_count

    def add_many(self, keys: Collection[int], row: int) -> None:
        pending = self._pending
        for key in keys:  # most keys are new: no empty list made and dropped per key, as setdefault would
            rows = pending.get(key)
            if rows is None:
                pending[key] = [row]
            else:
                rows.append(row)
        self._pending_count += len(keys)
        if self._pending_count > max(_MIN_PENDING, len(self._rows) // _PENDING_SHARE):
            self.compact()

    def get_many(self, keys: list[int], limit: int | None = None) -> list[int]:
        """Rows stored under any of ``keys`` (a row repeats once per key it is under).

        Keys holding more than ``limit`` rows are skipped: a key that common (a site's
        boilerplate sentence) says nothing about which document is repeated.
        """
        # Both ends of every key's run in two searches, then a Python loop over the few keys: a lookup
        # has 1-26 keys, where each further numpy call (to keep only the keys present) costs more than
        # the loop.  The array methods, not np.searchsorted, whose dispatch costs more than a small
        # search; the query array must carry the table's dtype, or numpy casts the whole table.
        found: list[int] = []
        pending = self._pending
        stored = self._keys
        held: dict[int, int] = {}  # position in keys -> rows the arrays hold under it
        if len(stored):
            query = np.array(keys, dtype=self._dtype)
            starts = stored.searchsorted(query).tolist()
            ends = stored.searchsorted(query, side="right").tolist()
            for i, (start, end) in enumerate(zip(starts, ends)):
                if end > start:
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
        """Merge pending entries into the sorted arrays, each after the rows its key already has.

        Rows arrive in increasing order, so that keeps them oldest first without sorting the whole
        table: one ``np.insert`` per array needs the new array and a one-byte mask per entry, where
        concatenating and sorting everything needed several copies and an 8-byte order per entry.
        """
        if not self._pending:
            return
        counts = np.fromiter(map(len, self._pending.values()), dtype=np.intp, count=len(self._pending))
        keys = np.repeat(np.fromiter(self._pending, dtype=self._dtype, count=len(self._pending)), counts)
        rows = np.fromiter(itertools.chain.from_iterable(self._pending.values()), dtype=np.uint32,
                           count=self._pending_count)
        order = np.argsort(keys, kind="stable")  # each key's pending rows keep their (increasing) order
        keys, rows = keys[order], rows[order]
        at = np.searchsorted(self._keys, keys, side="right")
        self._keys = np.insert(self._keys, at, keys)
        self._rows = np.insert(self._rows, at, rows)
        self._pending.clear()
        self._pending_count = 0

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """All ``(keys, rows)`` pairs, sorted by key: what a store saves to rebuild the table."""
        self.compact()
        return self._keys, self._rows

    @classmethod
    def build(cls, keys: np.ndarray, rows: np.ndarray) -> KeyTable:
        """Bulk load instead of n incremental inserts.  Every caller gives a key's rows oldest first, so
        one stable sort by key orders the table, and a snapshot's tables (saved sorted) need none."""
        table = cls(keys.dtype.type)
        rows = rows.astype(np.uint32, copy=False)
        if np.any(keys[1:] < keys[:-1]):
            order = np.argsort(keys, kind="stable")
            keys, rows = keys[order], rows[order]
        table._keys, table._rows = keys, rows
        return table

