"""A compact MinHash sketch per document: LSH band keys find candidates, overlap estimates verify them.

A 64-bit SimHash only finds near-identical texts, and exact passage hashes break on scattered
edits: a re-templated repost with 2 % edited characters shares few sentence runs with its source
and sits 8-18 bits away.  Character shingles survive scattered edits (one edit changes n of
them), and MinHash turns their overlap into equal sketch values:

- :func:`sketch`: one-permutation MinHash (Li, Owen & Zhang 2012) of the text's character
  4-grams, punctuation and spacing removed (so width and spacing changes are free): ``SKETCH_SIZE``
  bins, each the top 16 bits of its smallest hash's offset in the bin (order-preserving, so
  containment can be estimated).  One hash per shingle; 2 bytes per bin.  128 bins, not 64: the
  estimates' spread decides verdicts near the rule's lines, and halving their variance raised the
  natural corpora's precision by 1-3 points at the same recall (benchmarks/README.md).
- :func:`band_keys`: the sketch seen as ``KEY_BINS`` bins (each the minimum of two neighbours:
  exactly the 64-bin sketch), densified by rotation (Shrivastava & Li 2014), in bands of ``ROWS``
  values hashed to 32-bit keys.  Two texts with shingle Jaccard J share a key with probability
  ≈ 1 − (1 − J^ROWS)^BANDS.  Every key is an exact lookup (a keyword field in Elasticsearch, a
  key → rows table in memory).
- :func:`estimate_many`: Jaccard, and how much of the new text is inside the other (directed: a
  cut copy is inside its source, an article quoting a notice is not inside the notice).

Short texts work too: a 60-character clause has ~56 shingles; one edited character changes four.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import NamedTuple

import numpy as np

from ..model import SKETCH_SIZE, Features, Sketch

KEY_BINS = 64  # bins of the view that band keys are made from (pairs of neighbouring bins)
ROWS = 2  # values per band key
BANDS = 16  # band keys per document (the first BANDS * ROWS values of the view)
SHINGLE = 4  # characters per shingle: one size for every length, so any two sketches compare
EMPTY = 0xFFFF  # a bin no shingle fell into
MIN_SUPPORT = 8  # bins the new text must own before its share inside the other is estimated from them
# recorded with stores and indices: sketches (and the SimHash made from their shingle hashes, fingerprinter.py)
# compare only within one version.  "-simhash2": since issue 40 the default SimHash is of these hashes, not words.
VERSION = f"oph{SKETCH_SIZE}x16-char{SHINGLE}-bands{BANDS}x{ROWS}of{KEY_BINS}-simhash2"

_MIX = np.uint64(0x9E3779B97F4A7C15)
_PRIME = np.uint64(0x100000001B3)
_MIX_INT, _PRIME_INT, _MASK64 = int(_MIX), int(_PRIME), (1 << 64) - 1


def _word_table() -> np.ndarray:
    """For every BMP code point: True for letters, digits and CJK, False for punctuation, symbols
    and spacing (the ranges they occupy after NFKC).  U+FFFF stays True: :func:`shingle_hashes`
    looks every code point above the BMP (all words) up there."""
    table = np.ones(0x10000, dtype=bool)
    table[:0x80] = False
    for c in "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ":
        table[ord(c)] = True
    for lo, hi in ((0x80, 0xBF), (0x2000, 0x2BFF), (0x3000, 0x303F), (0xFE10, 0xFE6F),
                   (0xFF00, 0xFF0F), (0xFF1A, 0xFF20), (0xFF3B, 0xFF40), (0xFF5B, 0xFF65)):
        table[lo : hi + 1] = False
    return table


_WORD = _word_table()


class Overlap(NamedTuple):
    """Estimated shingle overlap of a new text with an earlier one."""

    jaccard: float
    contained: float  # share of the new text's shingles inside the earlier text
    shingles: int  # distinct shingles of the new text
    other: int  # distinct shingles of the earlier text


def shingle_hashes(text: str, n: int = SHINGLE) -> np.ndarray:
    """Sorted distinct 32-bit hashes (uint64) of the character n-grams of ``text``'s word characters."""
    codes = np.frombuffer(text.lower().encode("utf-32-le"), dtype=np.uint32)
    # mode="clip" reads every code point above the BMP at _WORD[0xFFFF] (a word) in the same call
    codes = codes.compress(_WORD.take(codes, mode="clip")).astype(np.uint64)
    if len(codes) < n:  # a text shorter than one shingle is one shingle
        codes = np.concatenate([codes, np.zeros(n - len(codes), dtype=np.uint64)])
    h = _mixed(_windows(codes, n))
    h.sort()
    return h[_starts_run(h)]


def shingle_hashes_many(texts: Sequence[str], n: int = SHINGLE) -> tuple[np.ndarray, np.ndarray]:
    """:func:`shingle_hashes` of many texts in one pass of numpy calls: the sorted distinct ``i << 32 | hash``
    (uint64) of each text ``i``'s shingles, so text i's hashes are one run, and the ``len(texts) + 1`` bounds
    of the runs (each holds at least one hash).  The texts' code points are concatenated, the windows that
    cross from one text into the next dropped, and all the hashes sorted at once.  On 64 news articles this
    costs about half of 64 calls of :func:`shingle_hashes`, a sixth on short texts; one text alone costs
    twice as much this way, so that stays a function of its own (benchmarks/README.md, issue 40)."""
    lowered = [text.lower() for text in texts]  # each alone: lower() reads a letter's neighbours (final sigma)
    codes = np.frombuffer("".join(lowered).encode("utf-32-le"), dtype=np.uint32)
    word = _WORD.take(codes, mode="clip")
    words_before = np.concatenate(([0], np.cumsum(word)))[np.cumsum([0, *map(len, lowered)])]
    lengths = np.diff(words_before)  # word characters per text
    codes = codes.compress(word).astype(np.uint64)
    short = lengths < n
    if short.any():  # zeros after each text shorter than one shingle, up to one shingle
        codes = np.insert(codes, np.repeat(words_before[1:][short], n - lengths[short]), np.uint64(0))
        lengths = np.maximum(lengths, n)
    h = _windows(codes, n)
    if n > 1:  # the windows that start in one text and end in the next
        within = np.ones(len(h), dtype=bool)
        within[(np.cumsum(lengths[:-1])[:, None] - np.arange(1, n)).ravel()] = False
        h = h.compress(within)
    h = _mixed(h)
    h |= np.repeat(np.arange(len(texts), dtype=np.uint64) << _TAG_SHIFT, lengths - (n - 1))
    h.sort()
    h = h[_starts_run(h)]
    return h, np.searchsorted(h, np.arange(len(texts) + 1, dtype=np.uint64) << _TAG_SHIFT)


def _windows(codes: np.ndarray, n: int) -> np.ndarray:
    """Polynomial hash mod 2**64 (wrapping on purpose) of every window of ``n`` code points (uint64),
    c0 P^(n-1) + ... + c(n-1), built by doubling the window (h[i] P^m + h[i + m]) and adding one code point
    where n's binary digits say: two products and two sums for n = 4, on whole arrays."""
    h, m = codes, 1
    for digit in bin(n)[3:]:
        h = h[:-m] * _power(m) + h[m:]
        m *= 2
        if digit == "1":
            h = h[:-1] * _PRIME + codes[m:]
            m += 1
    return h


def _mixed(h: np.ndarray) -> np.ndarray:
    """The windows' hashes mixed down to 32 bits, in place."""
    h ^= h >> np.uint64(31)
    h *= _MIX
    h ^= h >> np.uint64(29)
    h >>= _TAG_SHIFT
    return h


_TAG_SHIFT = np.uint64(32)  # a text's number is above its 32-bit hashes (shingle_hashes_many)


@cache
def _power(m: int) -> np.uint64:
    """``_PRIME`` ** m mod 2**64."""
    return np.uint64(pow(_PRIME_INT, m, 1 << 64))


def _starts_run(sorted_values: np.ndarray) -> np.ndarray:
    """True where a value differs from the one before it (the first of each run of equal values)."""
    out = np.empty(len(sorted_values), dtype=bool)
    out[:1] = True
    np.not_equal(sorted_values[1:], sorted_values[:-1], out=out[1:])
    return out


_BIN_BITS = 32 - (SKETCH_SIZE.bit_length() - 1)  # a hash's bin is its top bits
_OFFSET_SHIFT = np.uint64(max(0, _BIN_BITS + 1 - 17))  # the top 16 bits of an offset in the bin


def sketch(text: str) -> Sketch:
    """One-permutation MinHash of ``text``'s shingles: per bin, the top 16 bits of the smallest
    hash's offset in the bin (order-preserving), ``EMPTY`` where no shingle fell."""
    return sketch_of_hashes(shingle_hashes(text))


def sketch_of_hashes(h: np.ndarray) -> Sketch:
    """:func:`sketch` of a text from its :func:`shingle_hashes` (made once, for the SimHash too: simhash.py)."""
    return Sketch(_bins(h, _BIN_STARTS), len(h))


def sketches_of_hashes(h: np.ndarray, bounds: np.ndarray) -> tuple[np.ndarray, list[int]]:
    """The sketches' values (uint16[texts, SKETCH_SIZE]) and shingle counts of many texts from their
    :func:`shingle_hashes_many`: every text's bins found in one binary search."""
    return _bins(h, (np.arange(len(bounds) - 1, dtype=np.uint64) << _TAG_SHIFT)[:, None] + _BIN_STARTS), \
        np.diff(bounds).tolist()


def _bins(h: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Per bin of ``starts`` (its last axis: the bins' starts and the end of the last), the top 16 bits of the
    smallest hash's offset in the bin, ``EMPTY`` where none fell.  ``h`` is sorted, so a bin's smallest hash is
    the first at or after its start (one binary search of the bins' starts): every step after it is on the
    bins, not on the shingles."""
    at = np.searchsorted(h, starts)
    offsets = h.take(at[..., :-1], mode="clip")  # an empty bin's (the next bin's first, or past the end) is masked below
    offsets -= starts[..., :-1]
    offsets >>= _OFFSET_SHIFT
    values = np.minimum(offsets, EMPTY - 1).astype(np.uint16)
    values[at[..., 1:] == at[..., :-1]] = EMPTY
    return values


_BIN_STARTS = np.arange(SKETCH_SIZE + 1, dtype=np.uint64) << np.uint64(_BIN_BITS)  # and the end of the last bin


def _view_tables() -> tuple[np.ndarray, np.ndarray]:
    """What a view bin holds from its first bin's value (``> EMPTY`` when empty) and from its second's."""
    value = np.arange(0x10000, dtype=np.uint32)
    first = value >> 1
    first[EMPTY] = EMPTY + 1
    second = np.minimum(0x8000 | (value >> 1), EMPTY - 1)
    second[EMPTY] = EMPTY
    return first, second


_VIEW_FIRST, _VIEW_SECOND = _view_tables()


def key_view(values: np.ndarray) -> np.ndarray:
    """The ``KEY_BINS``-bin sketch of the same text (uint32), from the ``SKETCH_SIZE`` bins: a view bin covers
    two neighbouring bins, and its minimum is the first one's when that is filled, else the second's
    (offset by half the view bin's width).  One bit of the offset is lost, so this is exactly what a
    sketch of ``KEY_BINS`` bins would hold.  Two table lookups and a minimum: a filled first bin's entry is
    below every second bin's, an empty one's above."""
    return np.minimum(_VIEW_FIRST.take(values[..., 0::2]), _VIEW_SECOND.take(values[..., 1::2]))


_DENSE = ROWS * BANDS  # view bins the band keys are made of
_AT = np.arange(_DENSE)
_AT_TWICE = np.arange(2 * KEY_BINS)


def _densified(view: np.ndarray) -> np.ndarray:
    """The first ``ROWS * BANDS`` values densified by rotation (Shrivastava & Li 2014): an empty bin
    takes the next filled bin's value (cyclically) marked with the distance, so two texts agree on it
    only when they agree on that bin and on the gap.  Makes band keys work for short texts, where
    most bins are empty; a long text's are all filled, and are returned as they are."""
    head = view[:_DENSE]
    if head.max() != EMPTY:
        return head
    filled = np.flatnonzero(view != EMPTY)
    if not len(filled):
        return head
    nxt = np.append(filled, filled[0] + len(view))[np.searchsorted(filled, _AT)]  # past the last: the first
    return view[nxt % len(view)] + ((nxt - _AT).astype(np.uint64) << np.uint64(16))


def _densified_many(views: np.ndarray) -> np.ndarray:
    """:func:`_densified` of every row of ``views`` (uint64): the next filled bin of each of a row's first
    ``ROWS * BANDS`` bins is found in the row written twice (its position there counts the gap) by one
    running minimum from the right, for every row with an empty bin among them and a filled one."""
    head = views[:, :_DENSE].astype(np.uint64)
    sparse = np.flatnonzero((head == EMPTY).any(axis=1) & (views != EMPTY).any(axis=1))
    if len(sparse):
        rows = views[sparse]
        nxt = np.where(np.tile(rows != EMPTY, 2), _AT_TWICE, len(_AT_TWICE))
        nxt = np.minimum.accumulate(nxt[:, ::-1], axis=1)[:, : -_DENSE - 1 : -1]
        head[sparse] = np.take_along_axis(rows, nxt % KEY_BINS, axis=1) + ((nxt - _AT).astype(np.uint64) << np.uint64(16))
    return head


_BAND_STARTS = np.arange(1, BANDS + 1, dtype=np.uint64) * _PRIME  # the first row's key * _PRIME, per band
_MIX_THEN_PRIME = np.uint64(_MIX_INT * _PRIME_INT & _MASK64)


def band_keys(s: Sketch) -> list[int]:
    """32-bit keys of ``BANDS`` bands of ``ROWS`` densified values of the key view; the band number is in
    the key."""
    return _keys(_densified(key_view(s.values)).reshape(BANDS, ROWS)).tolist()


def band_keys_many(values: np.ndarray) -> np.ndarray:
    """:func:`band_keys` of many sketches' values (uint16[sketches, SKETCH_SIZE]) at once, as uint64[sketches,
    BANDS].  One sketch alone costs twice as much this way, so that stays a function of its own."""
    return _keys(_densified_many(key_view(values)).reshape(-1, BANDS, ROWS))


def _keys(rows: np.ndarray) -> np.ndarray:
    """The keys of bands of ``ROWS`` values (the last axis): per band, from ``band + 1``, per row
    ``key * _PRIME + value``, ``key ^= key >> 29``, ``key *= _MIX`` (mod 2**64); the key is the top 32 bits.
    Computed for all the bands at once."""
    key = _BAND_STARTS + rows[..., 0]
    for r in range(1, ROWS):
        key ^= key >> np.uint64(29)
        key *= _MIX_THEN_PRIME
        key += rows[..., r]
    key ^= key >> np.uint64(29)
    key *= _MIX
    key >>= np.uint64(32)
    return key


def estimate_many(s: Sketch, values: np.ndarray, shingles: np.ndarray) -> list[Overlap]:
    """:class:`Overlap` of the new text's sketch ``s`` with each of many earlier ones (``values``:
    uint16[n, SKETCH_SIZE]).

    In a bin, the minimum over A ∪ B is in A ∩ B when both minima are equal, and comes from A when
    A's is not larger (or B has none).  So Jaccard ≈ equal bins / bins filled in either (Li, Owen &
    Zhang 2012), and the share of A inside B is estimated twice: equal bins / bins whose minimum is
    A's, and from Jaccard and the exact shingle counts (|A ∩ B| = J (|A| + |B|) / (1 + J)).  Their
    errors are nearly independent, and each alone swings by 0.2 on a short text inside a long
    template, so the share is their mean.  Below ``MIN_SUPPORT`` bins of A's the first is noise
    (2 of 2 bins is not "inside"), so Jaccard stands in for it.
    """
    # Three counts per row in numpy (sums of booleans: np.count_nonzero with an axis is slower), the
    # arithmetic per row in Python floats: numpy's cost per call, not per row, dominates at the few
    # candidates of a typical lookup.  In a bin (EMPTY is the largest value): equal and filled = a
    # minimum in A ∩ B; A's smaller (B's empty or larger) = A's alone; and the other way round.
    a = s.values
    equal = ((a == values) & (a != EMPTY)).sum(axis=1).tolist()
    a_only = (a < values).sum(axis=1).tolist()
    b_only = (a > values).sum(axis=1).tolist()
    na = s.shingles
    out = []
    for eq, ao, bo, nb in zip(equal, a_only, b_only, shingles.tolist()):
        either = eq + ao + bo
        jaccard = eq / either if either else 0.0
        by_bins = eq / (eq + ao) if eq + ao >= MIN_SUPPORT else jaccard
        by_counts = min(1.0, jaccard * (na + nb) / ((1 + jaccard) * max(na, 1)))
        out.append(Overlap(jaccard, (by_bins + by_counts) / 2, na, nb))
    return out


def features_of(fingerprint: int, passages: list[int], summary: Sketch) -> Features:
    """Features with the sketch's band keys derived from it (computed, or read back from a store)."""
    return Features(fingerprint, passages, summary, band_keys(summary))
