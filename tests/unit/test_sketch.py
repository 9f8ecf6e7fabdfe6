"""The MinHash sketch: what it ignores, how close its estimates are, and what its keys share."""

from __future__ import annotations

import numpy as np
import pytest

from scrapy_zhdedup.model import SKETCH_BYTES, SKETCH_SIZE, Sketch
from scrapy_zhdedup.similarity import sketch
from tests.support import zhtexts


def exact(new: str, earlier: str, n: int = sketch.SHINGLE) -> tuple[float, float]:
    """Jaccard, and the share of ``new`` inside ``earlier``, counted."""
    x, y = sketch.shingle_hashes(new, n), sketch.shingle_hashes(earlier, n)
    inter = np.intersect1d(x, y).size
    return inter / (x.size + y.size - inter), inter / x.size


def estimate(new: Sketch, earlier: Sketch) -> sketch.Overlap:
    return sketch.estimate_many(new, earlier.values[None, :], np.array([earlier.shingles]))[0]


@pytest.fixture(scope="module")
def texts() -> list[str]:
    return [a.text for a in zhtexts.articles(6, min_chars=800)]


def test_punctuation_spacing_and_case_are_ignored() -> None:
    assert np.array_equal(sketch.shingle_hashes("台风“山竹”登陆，广东：停课！ABC"),
                          sketch.shingle_hashes("台风山竹 登陆 广东停课abc"))


def test_sketch_layout() -> None:
    s = sketch.sketch("国务院常务会议部署近期重点工作")
    assert s.values.dtype == np.uint16 and len(s.values) == SKETCH_SIZE
    assert s.shingles == sketch.shingle_hashes("国务院常务会议部署近期重点工作").size
    keys = sketch.band_keys(s)
    assert len(keys) == sketch.BANDS and all(0 <= k < 2**32 for k in keys)


def test_identical_texts(texts: list[str]) -> None:
    a, b = sketch.sketch(texts[0]), sketch.sketch(texts[0])
    assert estimate(a, b)[:2] == (1.0, 1.0)
    assert sketch.band_keys(a) == sketch.band_keys(b)


def test_edited_text_estimate_is_close_and_shares_keys(texts: list[str]) -> None:
    edited = zhtexts.edit_chars(texts[1], 20, seed=3)
    j, c, *_ = estimate(sketch.sketch(edited), sketch.sketch(texts[1]))
    true_j, true_c = exact(edited, texts[1])
    assert abs(j - true_j) < 0.15 and abs(c - true_c) < 0.15
    assert set(sketch.band_keys(sketch.sketch(texts[1]))) & set(sketch.band_keys(sketch.sketch(edited)))


def test_a_truncated_copy_is_inside_its_source_not_the_other_way_round(texts: list[str]) -> None:
    head = texts[2][: len(texts[2]) * 7 // 10]
    j, c, *_ = estimate(sketch.sketch(head), sketch.sketch(texts[2]))
    assert c >= 0.9 and j < c
    _, c_back, *_ = estimate(sketch.sketch(texts[2]), sketch.sketch(head))
    assert c_back < 0.8


def test_unrelated_texts_share_nothing(texts: list[str]) -> None:
    a, b = sketch.sketch(texts[3]), sketch.sketch(texts[4])
    j, c, *_ = estimate(a, b)
    assert j < 0.1 and c < 0.2
    assert not set(sketch.band_keys(a)) & set(sketch.band_keys(b))


def test_a_small_text_is_not_contained_in_a_large_one_by_chance(texts: list[str]) -> None:
    """A sentence against a long unrelated article owns few bins: containment falls back to Jaccard."""
    small = sketch.sketch("本报讯 记者从市气象台获悉，今天夜间到明天有小雨。")
    _, c, *_ = estimate(small, sketch.sketch("".join(texts)))
    assert c < 0.5


def test_short_text_with_one_edited_character_shares_a_key() -> None:
    a = "这本书印刷质量很好，内容也不错，孩子很喜欢，下次还会再来买。"
    b = a.replace("孩子", "孩孑")
    sa, sb = sketch.sketch(a), sketch.sketch(b)
    assert estimate(sa, sb)[0] >= 0.6
    assert set(sketch.band_keys(sa)) & set(sketch.band_keys(sb))


def test_serialised_sketch_round_trips_and_many_estimates_equal_single_ones(texts: list[str]) -> None:
    sketches = [sketch.sketch(t) for t in texts]
    again = [Sketch.from_bytes(s.to_bytes()) for s in sketches]
    assert all(np.array_equal(s.values, a.values) and s.shingles == a.shingles for s, a in zip(sketches, again))
    assert len(sketches[0].to_bytes()) == SKETCH_BYTES
    many = sketch.estimate_many(sketches[0], np.stack([s.values for s in sketches]),
                                np.array([s.shingles for s in sketches]))
    assert many == [estimate(sketches[0], s) for s in sketches]
    with pytest.raises(ValueError, match="260 bytes"):
        Sketch.from_bytes(b"short")


def test_band_keys_come_from_the_64_bin_view_of_the_sketch(texts: list[str]) -> None:
    """Pairs of neighbouring bins hold exactly a 64-bin sketch of the same text (sketch.key_view)."""
    for text in [*texts, "短", "国务院常务会议"]:
        h = sketch.shingle_hashes(text)
        bins, offsets = h >> np.uint64(26), h & np.uint64((1 << 26) - 1)
        first = np.concatenate(([True], bins[1:] != bins[:-1]))
        expected = np.full(sketch.KEY_BINS, sketch.EMPTY, dtype=np.uint16)
        expected[bins[first]] = np.minimum(offsets[first] >> np.uint64(10), sketch.EMPTY - 1)
        assert sketch.key_view(sketch.sketch(text).values).tolist() == expected.tolist()
