"""A compact MinHash sketch per document: LSH band keys find candidates, overlap estimates verify them.

A 64-bit SimHash only finds near-identical texts, and exact passage hashes break on scattered
edits: a re-templated repost with 2 % edited characters shares few sentence runs with its source
and sits 8-18 bits away.  Character shingles survive scattered edits (one edit changes n of
them), and MinHash turns their overlap into equal sketch values:

- :func:`sketch`: one-permutation MinHash (Li, Owen & Zhang 2012) of the text's character
  4-grams, punctuation and spacing removed (so width and spacing changes are free): ``SIZE``
  bins, each the top 16 bits of its smallest hash's offset in the bin (order-preserving, so
  containment can be estimated).  One hash per shingle; 2 bytes per bin.
- :func:`band_keys`: the bins densified by rotation (Shrivastava & Li 2014), in bands of ``ROWS``
  values hashed to 32-bit keys.  Two texts with shingle Jaccard J share a key with probability
  ≈ 1 − (1 − J^ROWS)^BANDS.  Every key is an exact lookup (a keyword field in Elasticsearch, a
  key → rows table in memory).
- :func:`estimate`: Jaccard, and the containment of the smaller shingle set in the larger, so a
  copy with a new headline or a cut tail is judged by how much of it is inside the other.

Short texts work too: a 60-character clause has ~56 shingles; one edited character changes four.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

SIZE = 64  # bins (values per sketch)
ROWS = 2  # values per band key
BANDS = 16  # band keys per document (the first BANDS * ROWS values)
SHINGLE = 4  # characters per shingle: one size for every length, so any two sketches compare
EMPTY = 0xFFFF  # a bin no shingle fell into
MIN_SUPPORT = 8  # bins the smaller text must own before its containment is estimated
VERSION = f"oph{SIZE}x16-char{SHINGLE}-bands{BANDS}x{ROWS}"  # recorded with stores and indices: sketches compare only within one
NBYTES = 2 * SIZE + 4  # serialised: the values, then the shingle count (u32)

_MIX = np.uint64(0x9E3779B97F4A7C15)
_PRIME = np.uint64(0x100000001B3)
_MASK32 = np.uint64(0xFFFFFFFF)


def _word_table() -> np.ndarray:
    """For every BMP code point: True for letters, digits and CJK, False for punctuation, symbols
    and spacing (the ranges they occupy after NFKC)."""
    table = np.ones(0x10000, dtype=bool)
    table[:0x80] = False
    for c in "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ":
        table[ord(c)] = True
    for lo, hi in ((0x80, 0xBF), (0x2000, 0x2BFF), (0x3000, 0x303F), (0xFE10, 0xFE6F),
                   (0xFF00, 0xFF0F), (0xFF1A, 0xFF20), (0xFF3B, 0xFF40), (0xFF5B, 0xFF65)):
        table[lo : hi + 1] = False
    return table


_WORD = _word_table()


class Sketch(NamedTuple):
    values: np.ndarray  # uint16[SIZE], EMPTY for empty bins
    shingles: int  # distinct shingles in the text (which of two texts is the smaller)

    def to_bytes(self) -> bytes:
        return self.values.astype("<u2").tobytes() + min(self.shingles, 0xFFFF_FFFF).to_bytes(4, "little")

    @classmethod
    def from_bytes(cls, data: bytes) -> Sketch:
        if len(data) != NBYTES:
            raise ValueError(f"a sketch is {NBYTES} bytes, not {len(data)}")
        return cls(np.frombuffer(data, dtype="<u2", count=SIZE).astype(np.uint16), int.from_bytes(data[-4:], "little"))


class Overlap(NamedTuple):
    """Estimated shingle overlap of two texts."""

    jaccard: float
    containment: float  # of the smaller text in the larger (= jaccard when too few bins speak for it)
    smaller: int  # distinct shingles of the smaller text


def shingle_hashes(text: str, n: int = SHINGLE) -> np.ndarray:
    """Sorted distinct 32-bit hashes of the character n-grams of ``text``'s word characters."""
    codes = np.frombuffer(text.lower().encode("utf-32-le"), dtype=np.uint32)
    codes = codes[_WORD[codes & 0xFFFF] | (codes > 0xFFFF)].astype(np.uint64)
    if len(codes) < n:  # a text shorter than one shingle is one shingle
        codes = np.concatenate([codes, np.zeros(n - len(codes), dtype=np.uint64)])
    width = len(codes) - n + 1
    h = np.zeros(width, dtype=np.uint64)
    for k in range(n):  # polynomial hash mod 2**64, wrapping on purpose
        h = h * _PRIME + codes[k : k + width]
    h ^= h >> np.uint64(31)
    h *= _MIX
    h ^= h >> np.uint64(29)
    h = np.sort(h >> np.uint64(32))
    return h[np.concatenate(([True], h[1:] != h[:-1]))]


def sketch(text: str) -> Sketch:
    """One-permutation MinHash of ``text``'s shingles: per bin, the top 16 bits of the smallest
    hash's offset in the bin (order-preserving), ``EMPTY`` where no shingle fell."""
    h = shingle_hashes(text)
    width = (1 << 32) // SIZE
    starts = np.arange(SIZE, dtype=np.uint64) * np.uint64(width)
    first = np.minimum(np.searchsorted(h, starts), len(h) - 1)  # h sorted: a bin's minimum comes first
    offsets = h[first] - starts
    filled = (h[first] >= starts) & (offsets < np.uint64(width))
    shift = np.uint64(max(0, width.bit_length() - 17))
    values = np.where(filled, np.minimum(offsets >> shift, EMPTY - 1), EMPTY).astype(np.uint16)
    return Sketch(values, len(h))


def _densified(values: np.ndarray) -> np.ndarray:
    """Rotation densification (Shrivastava & Li 2014): an empty bin takes the next filled bin's
    value marked with the distance, so two texts agree on it only when they agree on that bin and
    on the gap.  Makes band keys work for short texts, where most bins are empty."""
    filled_at = np.flatnonzero(values != EMPTY)
    if not len(filled_at):
        return values.astype(np.uint64)
    idx = np.arange(SIZE)
    nxt = filled_at[np.searchsorted(filled_at, idx) % len(filled_at)]
    return values[nxt].astype(np.uint64) + (((nxt - idx) % SIZE).astype(np.uint64) << np.uint64(16))


def band_keys(s: Sketch) -> list[int]:
    """32-bit keys of ``BANDS`` bands of ``ROWS`` densified values; the band number is in the key."""
    v = _densified(s.values)[: ROWS * BANDS].reshape(BANDS, ROWS)
    key = np.arange(BANDS, dtype=np.uint64) + np.uint64(1)
    for r in range(ROWS):
        key = key * _PRIME + v[:, r]
        key ^= key >> np.uint64(29)
        key *= _MIX
    return ((key >> np.uint64(32)) & _MASK32).tolist()


def estimate_many(s: Sketch, values: np.ndarray, shingles: np.ndarray) -> list[Overlap]:
    """:class:`Overlap` of ``s`` with each of many sketches (``values``: uint16[n, SIZE]).

    In a bin, the minimum over A ∪ B is in A ∩ B when both minima are equal, and comes from A when
    A's is not larger (or B has none).  So Jaccard ≈ equal bins / bins filled in either (Li, Owen &
    Zhang 2012), and containment of the smaller A is estimated twice: equal bins / bins whose
    minimum is A's, and from Jaccard and the exact shingle counts (|A ∩ B| = J (|A| + |B|) / (1 + J)).
    Their errors are nearly independent, and each alone swings by 0.2 on a short text inside a
    long template (a 300-shingle announcement owning 15 of 64 bins), so containment is their mean.
    Below ``MIN_SUPPORT`` owned bins the first is noise (2 of 2 bins is not "contained"), so
    Jaccard stands in for it.
    """
    a = s.values[None, :]
    fa, fb = a != EMPTY, values != EMPTY
    equal = np.count_nonzero(fa & fb & (a == values), axis=1)
    either = np.count_nonzero(fa | fb, axis=1)
    a_smaller = s.shingles <= shingles
    owned_by_a = np.count_nonzero(fa & (~fb | (a <= values)), axis=1)
    owned_by_b = np.count_nonzero(fb & (~fa | (values <= a)), axis=1)
    owned = np.where(a_smaller, owned_by_a, owned_by_b)
    jaccard = np.where(either > 0, equal / np.maximum(either, 1), 0.0)
    by_bins = np.where(owned >= MIN_SUPPORT, equal / np.maximum(owned, 1), jaccard)
    smaller = np.minimum(s.shingles, shingles)
    by_counts = np.minimum(1.0, jaccard * (s.shingles + shingles) / ((1 + jaccard) * np.maximum(smaller, 1)))
    containment = (by_bins + by_counts) / 2
    return [Overlap(float(j), float(c), int(m)) for j, c, m in zip(jaccard, containment, smaller)]


def estimate(a: Sketch, b: Sketch) -> Overlap:
    """:class:`Overlap` of two sketches."""
    return estimate_many(a, b.values[None, :], np.array([b.shingles]))[0]
