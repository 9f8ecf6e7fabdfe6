"""Exact-repeat memory: a pybloom-live scalable Bloom filter over content hashes.

The embedded store saves it inside its snapshot (embedded.py), so filter and index always come
from the same generation; pybloom-live reads truncated bytes without complaint, so integrity is
the snapshot's job (zip CRC), never this module's.

The store tests a content hash (``in``) and adds it only when absent; pybloom-live's ``add`` would
test it again (one more hashing of three), so the last key found absent is kept and its add goes
straight to the newest filter (a full one still grows through pybloom-live's ``add``).
"""

from __future__ import annotations

import io

from pybloom_live import ScalableBloomFilter

from ..errors import ConfigError


class ExactFilter:
    def __init__(self, *, error_rate: float = 0.001, initial_capacity: int = 100_000) -> None:
        if not 0 < error_rate < 1:
            raise ConfigError("bloom error_rate must be between 0 and 1")
        if initial_capacity < 1:
            raise ConfigError("bloom initial_capacity must be positive")
        self.error_rate = error_rate
        self.initial_capacity = initial_capacity
        self._bloom = ScalableBloomFilter(
            initial_capacity=initial_capacity, error_rate=error_rate, mode=ScalableBloomFilter.LARGE_SET_GROWTH
        )
        self._absent: str | None = None  # the last key tested and found absent, until anything is added

    def __contains__(self, content_hash: str) -> bool:
        present = content_hash in self._bloom
        self._absent = None if present else content_hash
        return present

    def __len__(self) -> int:
        return len(self._bloom)

    def add(self, content_hash: str) -> bool:
        """Add; True if it was (probably) there already."""
        known_absent, self._absent = content_hash == self._absent, None
        filters = self._bloom.filters
        if not known_absent or not filters or filters[-1].count >= filters[-1].capacity:
            return bool(self._bloom.add(content_hash))
        filters[-1].add(content_hash, skip_check=True)
        return False

    def to_bytes(self) -> bytes:
        payload = io.BytesIO()
        self._bloom.tofile(payload)
        return payload.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes, *, error_rate: float, initial_capacity: int) -> ExactFilter:
        """The inverse of :meth:`to_bytes`; the caller checks integrity (the snapshot's zip CRC)."""
        out = cls(error_rate=error_rate, initial_capacity=initial_capacity)
        out._bloom = ScalableBloomFilter.fromfile(io.BytesIO(data))
        return out
