"""One judged document as the memory of judged documents takes it (store.py), and as bytes (the
embedded store's log keeps each record as one frame of these: store/log.py)."""

from __future__ import annotations

import struct
from typing import NamedTuple

from ..model import SKETCH_BYTES

# entry, row, status, match, distance, similarity, contained, reason, root, fingerprint, hash, passages
_FIXED = struct.Struct("<IiBiBBBBIQ16sI")


class Record(NamedTuple):
    """One judged document, the one unit in which what is remembered changes.  ``row`` is -1 for an exact
    repeat (not indexed, only remembered)."""

    entry: int
    row: int
    status: int
    match: int
    distance: int
    similarity: int  # percent, as reported
    contained: int  # percent, as reported
    reason: int  # 0 for a unique document, else 1 + its index in model.REASONS
    root: int
    fingerprint: int
    content_hash: bytes  # 16 bytes
    passages: list[int]
    sketch: bytes  # model.SKETCH_BYTES for an indexed document (row >= 0), empty for an exact repeat
    doc_id: str

    def encode(self) -> bytes:
        fixed = _FIXED.pack(self.entry, self.row, self.status, self.match, self.distance, self.similarity,
                            self.contained, self.reason, self.root, self.fingerprint, self.content_hash,
                            len(self.passages))
        return (fixed + struct.pack(f"<{len(self.passages)}I", *self.passages) + self.sketch
                + self.doc_id.encode("utf-8"))

    @classmethod
    def decode(cls, payload: bytes) -> Record:
        entry, row, status, match, distance, similarity, contained, reason, root, fp, digest, n = \
            _FIXED.unpack_from(payload)
        start = _FIXED.size + 4 * n
        end = start + (SKETCH_BYTES if row >= 0 else 0)
        passages = list(struct.unpack_from(f"<{n}I", payload, _FIXED.size))
        return cls(entry, row, status, match, distance, similarity, contained, reason, root, fp, digest, passages,
                   payload[start:end], payload[end:].decode("utf-8"))
