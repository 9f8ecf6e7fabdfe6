"""Every judged document in judgement order: its id, content hash and verdict, packed in flat arrays.

This is what a rerun answers from (``previous``) and what ``zhdedup report --store`` lists; the near
index holds only the texts kept as candidates or cluster members (rows), so an entry names its row
(-1 for an exact repeat) and the row it repeats.  Shares are kept as whole percents.
"""

from __future__ import annotations

from array import array
from collections.abc import Mapping

import numpy as np

from ..index.multimap import KeyTable
from ..model import REASONS, Reason, Status, rounded
from .record import Record

STATUSES: tuple[Status, ...] = ("unique", "exact", "near")  # a status is kept as its index here
STATUS_CODES: dict[Status, int] = {status: code for code, status in enumerate(STATUSES)}
# the snapshot's arrays of the entries (ids are stored apart, NUL-separated UTF-8)
ARRAYS = ("entry_hashes", "entry_rows", "entry_status", "entry_match", "entry_distance", "entry_similarity",
          "entry_contained", "entry_reason")
_TYPES = {"entry_hashes": ("B", np.uint8), "entry_rows": ("i", np.int32), "entry_status": ("B", np.uint8),
          "entry_match": ("i", np.int32), "entry_distance": ("B", np.uint8), "entry_similarity": ("B", np.uint8),
          "entry_contained": ("B", np.uint8), "entry_reason": ("B", np.uint8)}


def percent(share: float) -> int:
    """A reported share (two decimals) as the byte the store keeps."""
    return round(100 * rounded(share))


def reason_code(reason: Reason | None) -> int:
    """0 for no reason (a unique text), else 1 + its index in REASONS."""
    return 0 if reason is None else 1 + REASONS.index(reason)


def _id_key(doc_id: str) -> int:
    """Key of the in-memory id table (rebuilt on every load, so the salted, cached str hash is fine)."""
    return hash(doc_id) & 0xFFFF_FFFF_FFFF_FFFF


class Entries:
    """The per-judgement table, with an id index to find a document's judgements."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self._columns: dict[str, array[int]] = {name: array(code) for name, (code, _) in _TYPES.items()}
        self._id_table = KeyTable(np.uint64)  # id hash -> entries

    def __len__(self) -> int:
        return len(self.ids)

    def append(self, record: Record) -> None:
        columns = self._columns
        self.ids.append(record.doc_id)
        columns["entry_hashes"].frombytes(record.content_hash)
        columns["entry_rows"].append(record.row)
        columns["entry_status"].append(record.status)
        columns["entry_match"].append(record.match)
        columns["entry_distance"].append(record.distance)
        columns["entry_similarity"].append(record.similarity)
        columns["entry_contained"].append(record.contained)
        columns["entry_reason"].append(record.reason)
        self._id_table.add_many([_id_key(record.doc_id)], record.entry)

    def of(self, doc_id: str) -> list[int]:
        """Every entry (judgement) recorded for ``doc_id``, oldest first."""
        return sorted(e for e in self._id_table.get_many([_id_key(doc_id)]) if self.ids[e] == doc_id)

    def row(self, entry: int) -> int:
        return self._columns["entry_rows"][entry]

    def match(self, entry: int) -> int:
        return self._columns["entry_match"][entry]

    def status(self, entry: int) -> Status:
        return STATUSES[self._columns["entry_status"][entry]]

    def content_hash(self, entry: int) -> str:
        return self._columns["entry_hashes"][16 * entry : 16 * entry + 16].tobytes().hex()

    def measures(self, entry: int) -> tuple[int, float, float, Reason]:
        """Distance, similarity, containment and reason of a repeat's entry."""
        columns = self._columns
        return (columns["entry_distance"][entry], columns["entry_similarity"][entry] / 100,
                columns["entry_contained"][entry] / 100, REASONS[columns["entry_reason"][entry] - 1])

    def arrays(self) -> dict[str, np.ndarray]:
        """Views of the live columns (not copies), for a snapshot; ``ids`` as NUL-separated UTF-8."""
        views = {name: np.frombuffer(self._columns[name], dtype=dtype) for name, (_, dtype) in _TYPES.items()}
        return {"ids": np.frombuffer("\x00".join(self.ids).encode("utf-8"), dtype=np.uint8), **views}

    @classmethod
    def from_arrays(cls, ids: list[str], data: Mapping[str, np.ndarray]) -> Entries:
        """The table a snapshot saved (checked by the caller: lengths agree)."""
        entries = cls()
        entries.ids = ids
        for name, (code, dtype) in _TYPES.items():
            entries._columns[name] = array(code, data[name].astype(dtype).tobytes())
        keys = np.fromiter((_id_key(i) for i in ids), dtype=np.uint64, count=len(ids))
        entries._id_table = KeyTable.build(keys, np.arange(len(ids), dtype=np.uint32))
        return entries
