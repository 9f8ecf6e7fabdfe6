"""Exact-repeat memory: a pybloom-live scalable Bloom filter over content hashes, persisted.

The file wraps pybloom-live's own serialisation in a header (magic, format version,
settings, SHA-256 of the payload): pybloom-live reads truncated or foreign bytes without
complaint, and a silently empty or garbled filter would let a repeated crawl re-admit
everything it had seen.
"""

from __future__ import annotations

import hashlib
import io
import json
import struct
from pathlib import Path
from typing import BinaryIO

from pybloom_live import ScalableBloomFilter

from .errors import ConfigError, StoreError
from .persist import atomic_write

_MAGIC = b"ZHDEDUP-BLOOM\n"
_FORMAT = 1


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

    def __contains__(self, content_hash: str) -> bool:
        return content_hash in self._bloom

    def __len__(self) -> int:
        return len(self._bloom)

    def add(self, content_hash: str) -> bool:
        """Add; True if it was (probably) there already."""
        return bool(self._bloom.add(content_hash))

    def nbytes(self) -> int:
        return sum(len(f.bitarray) // 8 for f in self._bloom.filters)

    def save(self, path: Path) -> None:
        payload = io.BytesIO()
        self._bloom.tofile(payload)
        data = payload.getvalue()
        meta = json.dumps({
            "format": _FORMAT, "error_rate": self.error_rate, "initial_capacity": self.initial_capacity,
            "count": len(self), "sha256": hashlib.sha256(data).hexdigest(),
        }).encode()

        def write(fh: BinaryIO) -> None:
            fh.write(_MAGIC + struct.pack("<I", len(meta)) + meta)
            fh.write(data)

        atomic_write(path, write)

    @classmethod
    def load(cls, path: Path) -> ExactFilter:
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise StoreError(path, f"cannot read Bloom filter file ({exc.strerror})") from exc
        if not raw.startswith(_MAGIC):
            raise StoreError(path, "not a scrapy-zhdedup Bloom filter file (bad magic)")
        try:
            (meta_len,) = struct.unpack_from("<I", raw, len(_MAGIC))
            start = len(_MAGIC) + 4
            meta = json.loads(raw[start : start + meta_len])
            data = raw[start + meta_len :]
            if not isinstance(meta, dict) or not {"format", "sha256", "error_rate", "initial_capacity"} <= meta.keys():
                raise ValueError("header is not a JSON object with format, sha256, error_rate, initial_capacity")
        except (struct.error, ValueError) as exc:
            raise StoreError(path, f"damaged Bloom filter header ({exc})") from exc
        if meta.get("format") != _FORMAT:
            raise StoreError(path, f"Bloom filter format {meta.get('format')!r} is not supported (expected {_FORMAT})")
        if hashlib.sha256(data).hexdigest() != meta.get("sha256"):
            raise StoreError(path, "Bloom filter checksum mismatch: the file is truncated or corrupt")
        out = cls(error_rate=meta["error_rate"], initial_capacity=meta["initial_capacity"])
        out._bloom = ScalableBloomFilter.fromfile(io.BytesIO(data))
        return out
