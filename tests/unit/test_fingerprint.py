"""The fast SimHash is bit for bit ``simhash.Simhash(features).value``."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest
import simhash

from scrapy_zhdedup.config import DedupConfig
from scrapy_zhdedup.similarity.fingerprinter import Fingerprinter
from scrapy_zhdedup.similarity.simhash import SimHasher, hamming, of_shingle_hashes, shingle_hash64
from scrapy_zhdedup.similarity.sketch import shingle_hashes
from scrapy_zhdedup.similarity.words import Featurizer
from scrapy_zhdedup.text.clean import TextCleaner
from scrapy_zhdedup.text.furniture import without_furniture
from tests.support import zhtexts

N_DOCS = 520
SHORT_CHARS = 190  # below DedupConfig.short_text_chars: the length "auto" fingerprints by shingles


@pytest.fixture(scope="module")
def texts() -> list[str]:
    cleaner = TextCleaner()
    return [cleaner.clean(text=a.text) for a in zhtexts.articles(N_DOCS)]


@pytest.mark.parametrize(("mode", "chars"), [("words", None), ("chars", SHORT_CHARS)], ids=["words", "chars"])
def test_equals_the_simhash_package_on_real_documents(texts: list[str], mode: str, chars: int | None) -> None:
    """Character shingles are what short texts get, so those run on each article's lead."""
    extract = Featurizer().words if mode == "words" else Featurizer().chars
    hasher = SimHasher()
    for text in texts:
        features = extract(text[:chars])
        assert hasher(features) == simhash.Simhash(features).value
    assert len(texts) >= 500


def test_cached_and_uncached_digests_agree(texts: list[str]) -> None:
    featurizer = Featurizer("words")
    warm = SimHasher()
    features = [featurizer.words(t) for t in texts[:40]]
    first = [warm(f) for f in features]
    assert [warm(f) for f in features] == first == [SimHasher()(f) for f in features]
    assert [warm(f, cache=False) for f in features] == first


def _random_features(rng: random.Random, n: int, weights: tuple[int, int]) -> dict[str, int]:
    return {f"特征{rng.randrange(10**9)}词": rng.randint(*weights) for _ in range(n)}


@pytest.mark.parametrize(
    "features",
    [
        {"国家统计局": 1},
        {"国家统计局": 255},
        {"增长": 7, "同比": 7},  # ties: a bit set by exactly half the weight stays 0
        {"经济": 1, "发展": 2, "改革": 3, "开放": 255},
        {f"第{i}条": 255 for i in range(300)},  # all at the maximum weight
        {f"第{i}条": 1 for i in range(5000)},
        {"GDP": 40, "gdp": 40, "６.４": 60, "😀": 9, "": 3},  # case, width, astral, empty feature
    ],
    ids=["one", "one-max", "tie", "mixed", "all-255", "many-ones", "odd-keys"],
)
def test_equals_the_simhash_package_on_edge_cases(features: dict[str, int]) -> None:
    assert SimHasher()(features) == simhash.Simhash(features).value


@pytest.mark.parametrize("n", [65_000, 70_000], ids=["float32-sums", "float64-sums"])
def test_many_features_at_weight_255_cross_the_exact_float32_range(n: int) -> None:
    """n * 255 is below 2**24 for 65,000 features and above it for 70,000."""
    features = {f"特征{i}": 255 for i in range(n)}
    assert SimHasher()(features) == simhash.Simhash(features).value


def test_random_weights_match() -> None:
    rng = random.Random(20261121)
    hasher = SimHasher()
    for _ in range(200):
        features = _random_features(rng, rng.randint(1, 400), (1, 255))
        assert hasher(features) == simhash.Simhash(features).value


def test_empty_features_give_zero() -> None:
    assert SimHasher()({}) == 0


def test_fingerprint_is_a_64_bit_unsigned_integer(texts: list[str]) -> None:
    hasher, featurizer = SimHasher(), Featurizer()
    values = {hasher(featurizer.words(t)) for t in texts[:100]}
    assert all(0 <= v < 2**64 for v in values)
    assert len(values) == 100  # distinct articles, distinct fingerprints
    assert any(v >= 2**63 for v in values)  # the top bit is used


def test_hamming() -> None:
    assert hamming(0, 0) == 0
    assert hamming(0, 2**64 - 1) == 64
    assert hamming(0b1011, 0b0110) == 3
    assert hamming(2**63, 0) == 1
    assert hamming(2**64 + 5, 5) == 0  # only the low 64 bits count
    rng = random.Random(7)
    for _ in range(500):
        a, b = rng.getrandbits(64), rng.getrandbits(64)
        assert hamming(a, b) == hamming(b, a) == simhash.Simhash(a).distance(simhash.Simhash(b))


def test_similar_articles_are_close_and_different_ones_far(texts: list[str]) -> None:
    hasher, featurizer = SimHasher(), Featurizer()
    fps = [hasher(featurizer.words(t)) for t in texts[:60]]
    edited = [hasher(featurizer.words(zhtexts.edit_chars(t, 2, seed=i))) for i, t in enumerate(texts[:60])]
    near = sorted(hamming(a, b) for a, b in zip(fps, edited))
    far = sorted(hamming(a, b) for a, b in itertools.pairwise(fps))
    assert near[len(near) // 2] <= 3
    assert far[len(far) // 2] >= 24


def _reference(hashes: list[int]) -> int:
    """The ``simhash`` package on the same features (each shingle hash, in decimal) and hash function."""
    return simhash.Simhash([str(h) for h in hashes], hashfunc=shingle_hash64).value


@pytest.mark.parametrize("text", [
    "国", "国家统计", "国家统计局", "增长增长增长增长",  # one shingle (padded), one, two, repeats: 2 distinct
    "国家统计局今天发布数据，十月份全国居民消费价格同比上涨百分之零点二。",
    "GDP grew 6.4% 😀 in Q1", "第1条" * 3000,
], ids=["one-char", "one-shingle", "two", "repeats", "sentence", "latin-astral", "long-repeats"])
def test_the_sketch_simhash_equals_the_simhash_package(text: str) -> None:
    hashes = shingle_hashes(text)
    assert of_shingle_hashes(hashes) == _reference(hashes.tolist())


def test_the_default_fingerprint_is_the_simhash_package_on_the_sketch_hashes() -> None:
    """What a document stores (furniture lines left out, as for its sketch) is bit-equal to the reference, on
    real articles and short texts; ties (even counts) and every bit position get exercised."""
    fingerprinter = Fingerprinter(DedupConfig())
    assert fingerprinter.featurizer is None and not fingerprinter.segments  # no jieba on the default path
    texts = [a.text for a in zhtexts.articles(30)] + [a.text for a in zhtexts.articles(30, min_chars=20,
                                                                                     max_chars=120)]
    bits = 0
    for text in texts:
        clean = fingerprinter.clean(text=text)
        features = fingerprinter.features(clean)
        hashes = shingle_hashes(without_furniture(clean))
        assert features.fingerprint == _reference(hashes.tolist()) == fingerprinter.fingerprint(
            without_furniture(clean))
        bits |= features.fingerprint
    assert bits == (1 << 64) - 1


def test_shingle_hash64_reads_any_bytes() -> None:
    """``simhash`` probes its hash function with b"test"; a decimal feature is read as its number."""
    assert shingle_hash64(b"12") != shingle_hash64(b"13")
    assert isinstance(shingle_hash64(b"test"), int)


@pytest.mark.parametrize("n", [1, 2, 254, 255, 256, 510, 5000])
def test_the_sketch_simhash_counts_bits_across_lane_chunks(n: int) -> None:
    """The bit counts are summed 255 rows at a time: every chunk boundary gives the reference's value."""
    hashes = np.array(sorted(random.Random(n).sample(range(1 << 32), n)), dtype=np.uint64)
    assert of_shingle_hashes(hashes) == _reference(hashes.tolist())
