"""A compact MinHash sketch per document: LSH band keys for candidates, overlap estimates to verify.

A 64-bit SimHash at k = 3 only finds near-identical texts, and exact passage hashes break on
scattered edits: a re-templated repost with 2 % edited characters shares few sentence runs with
its source and sits 8-18 bits away. Character shingles survive scattered edits (one edit
changes n shingles), and MinHash turns their overlap into equal sketch values:

- ``sketch``: one-permutation MinHash (Li, Owen & Zhang 2012) of the text's character n-grams
  (punctuation and spacing removed, so width and spacing changes are free), ``SIZE`` bins,
  empty bins filled by rotation (Shrivastava & Li 2014), each value kept as 16 bits
  (b-bit minwise hashing, Li & König 2010: a chance match costs 1/65536 of bias). One hash
  per shingle, so it is cheaper than a k-permutation MinHash.
- ``band_keys``: bands of ``ROWS`` consecutive values hashed to 32-bit keys. Two texts with
  shingle Jaccard J share at least one key with probability 1 − (1 − J^ROWS)^BANDS. Every key
  is an exact lookup (a keyword field in Elasticsearch, a key→rows table in memory).
- ``estimate``: Jaccard (share of equal values) and containment of the smaller shingle set in
  the larger (from J and the two set sizes), so a copy with a new headline or a cut tail is
  judged by how much of it is inside the other, not by a bit distance.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

SIZE = 64  # bins (values per sketch)
ROWS = 2  # values per band key
BANDS = 16  # band keys per document (the first BANDS * ROWS values)
SHINGLE = 3  # characters per shingle

_ASCII_WORD = np.zeros(128, dtype=bool)
_ASCII_WORD[[ord(c) for c in "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"]] = True
# Code point ranges that are punctuation, symbols or spacing (after NFKC), dropped before shingling.
_NOT_WORD_RANGES = np.array([(0x80, 0xBF), (0x2000, 0x2BFF), (0x3000, 0x303F), (0xFE10, 0xFE6F),
                             (0xFF00, 0xFF0F), (0xFF1A, 0xFF20), (0xFF3B, 0xFF40), (0xFF5B, 0xFF65)],
                            dtype=np.uint32)
_MIX = np.uint64(0x9E3779B97F4A7C15)
_PRIME = np.uint64(0x100000001B3)
_MASK32 = np.uint64(0xFFFFFFFF)


class Sketch(NamedTuple):
    values: np.ndarray  # uint16[SIZE]
    count: int  # distinct shingles in the text (for containment)


def shingle_hashes(text: str, n: int = SHINGLE) -> np.ndarray:
    """Sorted distinct 32-bit hashes of the character n-grams of ``text``'s word characters."""
    codes = np.frombuffer(text.lower().encode("utf-32-le"), dtype=np.uint32)
    codes = codes[_word_mask(codes)].astype(np.uint64)
    if len(codes) < n:  # a text shorter than one shingle is one shingle
        codes = np.concatenate([codes, np.zeros(n - len(codes), dtype=np.uint64)])
    width = len(codes) - n + 1
    h = np.zeros(width, dtype=np.uint64)
    for k in range(n):  # polynomial hash mod 2**64, wrapping on purpose
        h = h * _PRIME + codes[k : k + width]
    h ^= h >> np.uint64(31)
    h *= _MIX
    h ^= h >> np.uint64(29)
    return np.unique(h >> np.uint64(32))


def _word_mask(codes: np.ndarray) -> np.ndarray:
    """True for letters, digits and CJK: ASCII by table, the rest unless in a punctuation range."""
    ascii_ = codes < 128
    keep = np.where(ascii_, _ASCII_WORD[np.where(ascii_, codes, 0)], True)
    wide = np.flatnonzero(~ascii_)
    if len(wide):
        c = codes[wide]
        bad = np.zeros(len(wide), dtype=bool)
        for lo, hi in _NOT_WORD_RANGES:
            bad |= (c >= lo) & (c <= hi)
        keep[wide] = ~bad
    return keep


def sketch(text: str, n: int = SHINGLE, size: int = SIZE) -> Sketch:
    """One-permutation MinHash of ``text``'s n-grams, densified, 16 bits per value."""
    h = shingle_hashes(text, n)
    width = (1 << 32) // size
    bounds = np.arange(size + 1, dtype=np.uint64) * np.uint64(width)
    first = np.searchsorted(h, bounds[:-1])  # h is sorted: each bin's minimum is its first element
    filled = (first < len(h)) & (h[np.minimum(first, len(h) - 1)] < bounds[1:])
    offsets = np.where(filled, h[np.minimum(first, len(h) - 1)] - bounds[:-1], 0)
    # Rotation densification: an empty bin takes the next filled bin's value, marked with the
    # distance, so two texts agree on it only when they agree on that bin and on the gap.
    idx = np.arange(size)
    filled_at = np.flatnonzero(filled)
    nxt = filled_at[np.searchsorted(filled_at, idx) % len(filled_at)]
    gap = (nxt - idx) % size
    mixed = (offsets[nxt].astype(np.uint64) + np.uint64(width) * gap.astype(np.uint64)) * _MIX
    values = ((mixed >> np.uint64(48)) & np.uint64(0xFFFF)).astype(np.uint16)
    return Sketch(values, int(len(h)))


def band_keys(s: Sketch, rows: int = ROWS, bands: int = BANDS) -> list[int]:
    """32-bit keys of ``bands`` bands of ``rows`` values; the band number is part of the key."""
    v = s.values[: rows * bands].astype(np.uint64).reshape(bands, rows)
    key = np.arange(bands, dtype=np.uint64) + np.uint64(1)
    for r in range(rows):
        key = key * _PRIME + v[:, r]
        key ^= key >> np.uint64(29)
        key *= _MIX
    return ((key >> np.uint64(32)) & _MASK32).tolist()


def estimate(a: Sketch, b: Sketch) -> tuple[float, float]:
    """(Jaccard, containment of the smaller shingle set in the larger), estimated from the sketches.

    |A ∩ B| = J (|A| + |B|) / (1 + J), so containment = that / min(|A|, |B|), capped at 1.
    """
    j = float(np.count_nonzero(a.values == b.values)) / len(a.values)
    smaller = min(a.count, b.count)
    inter = j * (a.count + b.count) / (1 + j)
    return j, (min(1.0, inter / smaller) if smaller else 0.0)
