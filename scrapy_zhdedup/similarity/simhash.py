"""64-bit SimHash, bit-for-bit equal to ``simhash.Simhash(features).value`` (or, for :func:`of_shingle_hashes`,
to ``simhash.Simhash([str(h) for h in hashes], hashfunc=shingle_hash64).value``).

The ``simhash`` package hashes every feature with MD5 on every call and sums bit arrays
feature by feature.  Words repeat heavily across a corpus, so we memoise each word's 8 hash
bytes, and do the weighted bit sums as one small matrix product.  Weights must be
integers: integer sums make the ``> total / 2`` threshold exact, so the result cannot drift
from the reference implementation through rounding (float32 represents integer sums exactly
below 2**24; above that we switch to float64).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import cast

import numpy as np

try:  # CPython's own MD5: ~0.25 µs a call on a shingle where OpenSSL's costs ~0.55 (set-up per call)
    from _md5 import md5  # type: ignore[import-not-found]  # no stubs
except ImportError:  # a build without it (it is optional): same digests, slower
    from hashlib import md5

BITS = 64
_MASK = (1 << BITS) - 1
# Feature hashes cached, per process (cleared when full).  A miss is one MD5 (~2.4 µs, benchmarks caches),
# so even a hit rate of 0.89 (at 100k entries on 20k documents) costs < 0.1 ms per document; 200k
# entries (~28 MB) is where the rate stops paying for the memory.
_CACHE_LIMIT = 200_000
_FLOAT32_EXACT = 1 << 24

Features = Mapping[str, int]


class SimHasher:
    """Computes fingerprints; keeps a bounded cache of word hashes.

    Words repeat across a corpus (hit rate 0.97, benchmarks caches); a short text's character shingles
    mostly do not (~0.1 on short reviews), and caching them cost more than hashing them again: they
    are hashed without the cache (``cache=False``).
    """

    def __init__(self) -> None:
        self._cache: dict[str, bytes] = {}

    def _cached_digests(self, names: list[str]) -> bytes:
        cache = self._cache
        digests = list(map(cache.get, names))
        try:
            return b"".join(cast("list[bytes]", digests))  # a None makes join raise: handled below
        except TypeError:  # some features not cached yet
            missing = [f for f, d in zip(names, digests) if d is None]
            if len(cache) + len(missing) > _CACHE_LIMIT:
                cache.clear()
                missing = names
            cache.update(zip(missing, map(_digest, missing)))
            return b"".join(map(cache.__getitem__, names))

    def __call__(self, features: Features, *, cache: bool = True) -> int:
        if not features:
            return 0
        names = list(features)
        # Uncached: inline, not through _digest, and whole digests (a Python call or a slice per
        # shingle costs about as much as its MD5); each row's last 8 bytes are the hash either way.
        raw = self._cached_digests(names) if cache else b"".join([md5(f.encode()).digest() for f in names])
        digests = np.frombuffer(raw, dtype=np.uint8).reshape(len(names), -1)[:, -8:]
        bits = np.unpackbits(digests, axis=1)  # column 0 = bit 63
        weights = list(features.values())
        total = sum(weights)
        sums = np.array(weights, dtype=np.float32 if total < _FLOAT32_EXACT else np.float64) @ bits
        return int.from_bytes(np.packbits(sums * 2 > total), "big")


_SM1, _SM2, _SM3 = 0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB  # splitmix64's constants
_SM1_U, _SM2_U, _SM3_U = np.uint64(_SM1), np.uint64(_SM2), np.uint64(_SM3)
_S30, _S27, _S31 = np.uint64(30), np.uint64(27), np.uint64(31)


def shingle_hash64(feature: bytes) -> int:
    """The 64-bit hash of a shingle hash written in decimal: splitmix64's finaliser of the number (other bytes,
    such as the probe ``simhash`` calls it with, are read as a big-endian number).  The reference for
    :func:`of_shingle_hashes` (``simhash.Simhash(..., hashfunc=shingle_hash64)``), one feature at a time."""
    z = ((int(feature) if feature.isdigit() else int.from_bytes(feature, "big")) + _SM1) & _MASK
    z = ((z ^ (z >> 30)) * _SM2) & _MASK
    z = ((z ^ (z >> 27)) * _SM3) & _MASK
    return z ^ (z >> 31)


def of_shingle_hashes(hashes: np.ndarray) -> int:
    """SimHash of the sketch's distinct 32-bit shingle hashes (sketch.py), each a feature of weight 1 widened to
    64 bits by :func:`shingle_hash64`: no segmentation and no MD5, only numpy over hashes already made.  A bit
    is set when more than half the features have it set, as in ``simhash``."""
    n = len(hashes)
    if not n:
        return 0
    # Widened into a zeroed buffer of whole blocks of _LANE_ROWS rows: zero rows add no bits (_bit_counts).
    padded = np.zeros(-(-n // _LANE_ROWS) * _LANE_ROWS, dtype=np.uint64)
    z = padded[:n]
    np.add(hashes, _SM1_U, out=z, casting="unsafe")  # mod 2**64, on purpose (arrays wrap without a warning)
    _splitmixed(z)
    counts = _bit_counts(padded)  # [j, b]: how many have bit 8 b + j set
    return int.from_bytes(np.packbits(counts * 2 > n, axis=0, bitorder="little").tobytes(), "little")


def of_shingle_hashes_many(hashes: np.ndarray, bounds: np.ndarray) -> list[int]:
    """:func:`of_shingle_hashes` of many texts from their ``sketch.shingle_hashes_many`` (text i's hashes in
    ``hashes[bounds[i]:bounds[i + 1]]``, at least one, the text's number above bit 32: the low 32 bits are the
    hash), in one pass of numpy calls over all of them.  One text alone costs twice as much this way, so
    that stays a function of its own."""
    z = hashes & _LOW32
    z += _SM1_U
    counts = np.diff(bounds)
    bits = _bit_counts_many(_splitmixed(z), bounds[:-1], counts) * 2 > counts[None, :, None]  # [j, text, b]
    packed = np.packbits(bits.transpose(1, 2, 0), axis=2, bitorder="little")  # [text, b, 1]: byte b of the value
    return packed.reshape(-1, 8).view("<u8").ravel().tolist()


def _splitmixed(z: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser of ``z`` (already plus its first constant), in place."""
    z ^= z >> _S30
    z *= _SM2_U
    z ^= z >> _S27
    z *= _SM3_U
    z ^= z >> _S31
    return z


_LOW32 = np.uint64(0xFFFF_FFFF)
_LANE_ROWS = 255  # rows summed at once in byte lanes: 255 ones still fit a byte
_BYTE_SHIFTS = np.arange(8, dtype=np.uint64)[:, None]
_LOW_BITS = np.uint64(0x0101010101010101)  # bit 0 of each byte


def _lanes(z: np.ndarray) -> np.ndarray:
    """[j, i]: bit j of every byte of ``z[i]`` shifted down to the byte's lowest bit (one broadcast shift and one
    mask for the eight j), so each word holds eight byte lanes of 0 or 1: 255 of them summed cannot carry.
    Fewer numpy calls and bytes than unpacking every bit into a byte, and no BLAS product: OpenBLAS's threads
    cost more CPU than they save on a busy machine."""
    lanes = z >> _BYTE_SHIFTS
    lanes &= _LOW_BITS
    return lanes


def _bit_counts(z: np.ndarray) -> np.ndarray:
    """How many of the 64-bit values ``z`` (a whole number of blocks of ``_LANE_ROWS``) have each bit set, as
    an 8 x 8 array: [j, b] counts bit 8 b + j.  The lanes (:func:`_lanes`) summed down the rows, 255 at a time,
    in contiguous words, then the blocks' bytes."""
    sums = _lanes(z).reshape(8, -1, _LANE_ROWS).sum(axis=2, dtype=np.uint64)
    return sums.astype("<u8", copy=False).view(np.uint8).reshape(8, -1, 8).sum(axis=1, dtype=np.int64)


def _bit_counts_many(z: np.ndarray, starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """:func:`_bit_counts` of each text's values (``z[starts[i]:starts[i] + counts[i]]``, ``counts`` > 0), as an
    8 x texts x 8 array: the lanes summed in blocks of at most 255 rows of one text (one ``reduceat`` for all
    the blocks of all the texts), then the blocks' bytes per text (one more)."""
    blocks = -(-counts // _LANE_ROWS)  # per text
    first = np.cumsum(blocks) - blocks  # each text's first block
    block_starts = np.repeat(starts - first * _LANE_ROWS, blocks) + np.arange(blocks.sum()) * _LANE_ROWS
    sums = np.add.reduceat(_lanes(z), block_starts, axis=1)  # [j, block]
    return np.add.reduceat(sums.astype("<u8", copy=False).view(np.uint8).reshape(8, -1, 8), first, axis=1,
                           dtype=np.int64)


def _digest(feature: str) -> bytes:
    """Last 8 MD5 bytes, as ``simhash`` takes them for ``f=64``."""
    return md5(feature.encode("utf-8")).digest()[8:]


def hamming(a: int, b: int) -> int:
    return ((a ^ b) & _MASK).bit_count()
