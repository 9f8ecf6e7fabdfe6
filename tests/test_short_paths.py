"""The cheaper per-document paths for short texts compute exactly what the code they replaced did.

Each ``_old_*`` function is the previous implementation, kept here verbatim as the reference; the
inputs are random mixes (CJK, ASCII, full-width forms, punctuation, spacing, characters above the
BMP) and the edge cases: empty, 1-4 characters, punctuation only, astral only, and texts whose
shingles repeat more often than the weight cap.
"""

from __future__ import annotations

import random
from collections import Counter
from hashlib import md5

import numpy as np
import pytest
import simhash
import zhtexts

from scrapy_zhdedup import sketch
from scrapy_zhdedup.features import _KEEP_CHARS, MAX_WEIGHT, Featurizer
from scrapy_zhdedup.fingerprint import SimHasher

EDGE = ["", "a", "好", "。", "𠀀", "ab", "你好", "a𠀀", "，。", "abc", "国务院", "𠀀𠀁𠀂", "，。！？", "abcd",
        "国务院会", "a好𠀀。", "   ", "\n\n", "！！！…………", "\U0010ffff\uffff\ufffe", "ＡＢＣ１２３", "ABCabc",
        "的" * 300, "ab" * 400, "哈哈哈" * 120]


def _random_text(rng: random.Random) -> str:
    ranges = [(0x20, 0x7F), (0x4E00, 0x9FFF), (0x3000, 0x3040), (0xFF00, 0xFF65), (0x2000, 0x2C00),
              (0x10000, 0x10FFFF), (0x80, 0x2000), (0xE000, 0x10000)]
    return "".join(chr(rng.randrange(*rng.choice(ranges))) for _ in range(rng.randrange(0, 260)))


@pytest.fixture(scope="module")
def inputs() -> list[str]:
    rng = random.Random(20260610)
    real = [a.text[: rng.randrange(1, 400)] for a in zhtexts.articles(60)]
    return EDGE + real + [_random_text(rng) for _ in range(600)]


# --- features and SimHash ------------------------------------------------------------------------


def _old_chars(text: str, shingle_size: int = 3) -> dict[str, int]:
    compact = _KEEP_CHARS.sub("", text).lower()
    n = min(shingle_size, len(compact))
    if n == 0:
        return {}
    counts = Counter(compact[i : i + n] for i in range(len(compact) - n + 1))
    return {g: min(MAX_WEIGHT, c) for g, c in counts.items()}


@pytest.mark.parametrize("shingle_size", [1, 3, 5])
def test_chars_equal_the_old_features_in_order(inputs: list[str], shingle_size: int) -> None:
    featurizer = Featurizer("chars", shingle_size=shingle_size)
    for text in inputs:
        assert list(featurizer.chars(text).items()) == list(_old_chars(text, shingle_size).items())


def test_uncached_simhash_of_shingles_equals_the_package_and_the_cached_path(inputs: list[str]) -> None:
    featurizer, cached, uncached = Featurizer("chars"), SimHasher(), SimHasher()
    for text in inputs:
        features = featurizer.chars(text)
        value = uncached(features, cache=False)
        assert value == cached(features) == (simhash.Simhash(features).value if features else 0)


def test_md5_is_md5() -> None:
    from scrapy_zhdedup.fingerprint import md5 as used

    for feature in ["", "a", "国务院", "𠀀", "x" * 1000]:
        assert used(feature.encode()).digest() == md5(feature.encode()).digest()


# --- MinHash sketch ------------------------------------------------------------------------------


def _old_shingle_hashes(text: str, n: int = sketch.SHINGLE) -> np.ndarray:
    codes = np.frombuffer(text.lower().encode("utf-32-le"), dtype=np.uint32)
    codes = codes[sketch._WORD[codes & 0xFFFF] | (codes > 0xFFFF)].astype(np.uint64)
    if len(codes) < n:
        codes = np.concatenate([codes, np.zeros(n - len(codes), dtype=np.uint64)])
    width = len(codes) - n + 1
    h = np.zeros(width, dtype=np.uint64)
    for k in range(n):
        h = h * sketch._PRIME + codes[k : k + width]
    h ^= h >> np.uint64(31)
    h *= sketch._MIX
    h ^= h >> np.uint64(29)
    h = np.sort(h >> np.uint64(32))
    return h[np.concatenate(([True], h[1:] != h[:-1]))]


def _old_sketch(text: str) -> sketch.Sketch:
    h = _old_shingle_hashes(text)
    width = (1 << 32) // sketch.SIZE
    starts = np.arange(sketch.SIZE, dtype=np.uint64) * np.uint64(width)
    first = np.minimum(np.searchsorted(h, starts), len(h) - 1)
    offsets = h[first] - starts
    filled = (h[first] >= starts) & (offsets < np.uint64(width))
    shift = np.uint64(max(0, width.bit_length() - 17))
    values = np.where(filled, np.minimum(offsets >> shift, sketch.EMPTY - 1), sketch.EMPTY).astype(np.uint16)
    return sketch.Sketch(values, len(h))


def _old_band_keys(s: sketch.Sketch) -> list[int]:
    values = s.values
    filled_at = np.flatnonzero(values != sketch.EMPTY)
    if not len(filled_at):
        dense = values.astype(np.uint64)
    else:
        idx = np.arange(sketch.SIZE)
        nxt = filled_at[np.searchsorted(filled_at, idx) % len(filled_at)]
        dense = values[nxt].astype(np.uint64) + (((nxt - idx) % sketch.SIZE).astype(np.uint64) << np.uint64(16))
    v = dense[: sketch.ROWS * sketch.BANDS].reshape(sketch.BANDS, sketch.ROWS)
    key = np.arange(sketch.BANDS, dtype=np.uint64) + np.uint64(1)
    for r in range(sketch.ROWS):
        key = key * sketch._PRIME + v[:, r]
        key ^= key >> np.uint64(29)
        key *= sketch._MIX
    return ((key >> np.uint64(32)) & np.uint64(0xFFFFFFFF)).tolist()


def _old_estimate_many(s: sketch.Sketch, values: np.ndarray, shingles: np.ndarray) -> list[sketch.Overlap]:
    a = s.values[None, :]
    fa, fb = a != sketch.EMPTY, values != sketch.EMPTY
    equal = np.count_nonzero(fa & fb & (a == values), axis=1)
    either = np.count_nonzero(fa | fb, axis=1)
    a_smaller = s.shingles <= shingles
    owned_by_a = np.count_nonzero(fa & (~fb | (a <= values)), axis=1)
    owned_by_b = np.count_nonzero(fb & (~fa | (values <= a)), axis=1)
    owned = np.where(a_smaller, owned_by_a, owned_by_b)
    jaccard = np.where(either > 0, equal / np.maximum(either, 1), 0.0)
    by_bins = np.where(owned >= sketch.MIN_SUPPORT, equal / np.maximum(owned, 1), jaccard)
    smaller = np.minimum(s.shingles, shingles)
    by_counts = np.minimum(1.0, jaccard * (s.shingles + shingles) / ((1 + jaccard) * np.maximum(smaller, 1)))
    containment = (by_bins + by_counts) / 2
    return [sketch.Overlap(float(j), float(c), int(m)) for j, c, m in zip(jaccard, containment, smaller)]


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
def test_shingle_hashes_equal_the_old_ones(inputs: list[str], n: int) -> None:
    for text in inputs:
        new, old = sketch.shingle_hashes(text, n), _old_shingle_hashes(text, n)
        assert new.dtype == old.dtype and np.array_equal(new, old), text


def test_sketches_equal_the_old_ones(inputs: list[str]) -> None:
    assert sketch._WORD[0xFFFF]  # what shingle_hashes reads for every code point above the BMP
    for text in inputs:
        new, old = sketch.sketch(text), _old_sketch(text)
        assert new.values.dtype == old.values.dtype and np.array_equal(new.values, old.values), text
        assert new.shingles == old.shingles


def _sketches_with_edge_layouts(inputs: list[str]) -> list[sketch.Sketch]:
    """Real sketches, plus no bin filled, one filled at either end, all filled, and maximal values."""
    rng = np.random.default_rng(5)
    odd = []
    for filled in ([], [0], [sketch.SIZE - 1], [31, 32], list(range(sketch.SIZE)), [5, 40]):
        values = np.full(sketch.SIZE, sketch.EMPTY, dtype=np.uint16)
        values[filled] = rng.integers(0, sketch.EMPTY, size=len(filled))
        odd.append(sketch.Sketch(values, len(filled)))
    odd.append(sketch.Sketch(np.full(sketch.SIZE, sketch.EMPTY - 1, dtype=np.uint16), 10**6))
    return odd + [sketch.sketch(t) for t in inputs]


def test_band_keys_equal_the_old_ones(inputs: list[str]) -> None:
    for s in _sketches_with_edge_layouts(inputs):
        assert sketch.band_keys(s) == _old_band_keys(s)


def _edited(s: sketch.Sketch, rng: random.Random) -> sketch.Sketch:
    """A near copy of ``s`` (a few bins emptied, filled or changed; a few more or fewer shingles),
    so every count lands near the thresholds: equal bins, owned bins around MIN_SUPPORT."""
    values = s.values.copy()
    for i in rng.sample(range(sketch.SIZE), rng.randrange(0, 12)):
        values[i] = rng.choice([sketch.EMPTY, rng.randrange(sketch.EMPTY), max(0, int(values[i]) - 1)])
    return sketch.Sketch(values, max(0, s.shingles + rng.randrange(-5, 6)))


@pytest.mark.parametrize("rows", [1, 2, 5, 40, 200])
@pytest.mark.parametrize("dtype", [np.uint32, np.int64], ids=["store-counts", "es-counts"])
def test_estimates_equal_the_old_ones_bit_for_bit(inputs: list[str], rows: int, dtype: type) -> None:
    """Same floats (not merely close), same Python types, whatever the number of candidates."""
    sketches = _sketches_with_edge_layouts(inputs)
    rng = random.Random(rows)
    for _ in range(60):
        query = rng.choice(sketches)
        others = [rng.choice(sketches) if rng.random() < 0.3 else _edited(query, rng) for _ in range(rows)]
        values = np.stack([s.values for s in others])
        shingles = np.array([s.shingles for s in others], dtype=dtype)
        new, old = sketch.estimate_many(query, values, shingles), _old_estimate_many(query, values, shingles)
        assert new == old
        assert all(type(x) is type(y) for n, o in zip(new, old) for x, y in zip(n, o))


def _old_segment(text: str) -> str:
    import re

    from scrapy_zhdedup.features import cut

    return " ".join(w.lower() for w in cut(text) if re.search(r"[\w\u3400-\u9fff]", w))


def test_search_words_equal_the_old_ones(inputs: list[str]) -> None:
    from es_plugin.chinese import segment

    cased = ["ΟΔΟΣ ΟΔΟΣΑ Σ ΣΑ", "İstanbul İİ", "ǅemal ǄEMAL", "ＡＢＣ abc ΑΒΓ", "Straße STRASSE"]
    for text in [*inputs, *cased]:
        assert segment(text) == _old_segment(text)
