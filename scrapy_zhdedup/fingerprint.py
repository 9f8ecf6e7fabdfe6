"""64-bit SimHash, bit-for-bit equal to ``simhash.Simhash(features).value``.

The ``simhash`` package hashes every feature with MD5 on every call and sums bit arrays
feature by feature.  Features repeat heavily across a corpus, so we memoise each feature's
8 hash bytes and do the weighted bit sums as one small matrix product.  Weights must be
integers: integer sums make the ``> total / 2`` threshold exact, so the result cannot drift
from the reference implementation through rounding (float32 represents integer sums exactly
below 2**24; above that we switch to float64).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import cast

import numpy as np

BITS = 64
_MASK = (1 << BITS) - 1
# Feature hashes cached, per process (cleared when full).  A miss is one MD5 (~2.4 µs, bench_caches),
# so even a hit rate of 0.89 (at 100k entries on 20k documents) costs < 0.1 ms per document; 200k
# entries (~28 MB) is where the rate stops paying for the memory.
_CACHE_LIMIT = 200_000
_FLOAT32_EXACT = 1 << 24

Features = Mapping[str, int]


class SimHasher:
    """Computes fingerprints; keeps a bounded cache of feature hashes."""

    def __init__(self) -> None:
        self._cache: dict[str, bytes] = {}

    def _digest(self, feature: str) -> bytes:
        """Last 8 MD5 bytes, as ``simhash`` takes them for ``f=64``."""
        if len(self._cache) >= _CACHE_LIMIT:
            self._cache.clear()
        digest = self._cache[feature] = hashlib.md5(feature.encode("utf-8")).digest()[-8:]
        return digest

    def _bits(self, names: Iterable[str]) -> np.ndarray:
        """(n, 64) matrix of feature-hash bits, column 0 = bit 63."""
        digests = list(map(self._cache.get, names))
        try:
            raw = b"".join(cast("list[bytes]", digests))  # a None makes join raise: handled below
        except TypeError:  # some features not cached yet
            raw = b"".join(d if d is not None else self._digest(f) for f, d in zip(names, digests))
        return np.unpackbits(np.frombuffer(raw, dtype=np.uint8).reshape(-1, 8), axis=1)

    def __call__(self, features: Features) -> int:
        if not features:
            return 0
        weights = np.fromiter(features.values(), dtype=np.float64, count=len(features))
        total = weights.sum()
        dtype = np.float32 if total < _FLOAT32_EXACT else np.float64
        sums = weights.astype(dtype) @ self._bits(list(features)).astype(dtype)
        return int.from_bytes(np.packbits(sums * 2 > total), "big")


def hamming(a: int, b: int) -> int:
    return ((a ^ b) & _MASK).bit_count()
