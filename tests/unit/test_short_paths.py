"""The cheaper per-document paths for short texts compute exactly what the code they replaced did.

Each ``_old_*`` function is the previous implementation, kept here verbatim as the reference; the
inputs are random mixes (CJK, ASCII, full-width forms, punctuation, spacing, characters above the
BMP) and the edge cases: empty, 1-4 characters, punctuation only, astral only, and texts whose
shingles repeat more often than the weight cap.
"""

from __future__ import annotations

import random
import re
import unicodedata
from collections import Counter
from hashlib import blake2b, md5

import numpy as np
import pytest
import simhash

from scrapy_zhdedup.errors import JunkError
from scrapy_zhdedup.model import SKETCH_SIZE, Sketch
from scrapy_zhdedup.similarity import sketch
from scrapy_zhdedup.similarity.simhash import SimHasher
from scrapy_zhdedup.similarity.words import _KEEP_CHARS, MAX_WEIGHT, Featurizer
from scrapy_zhdedup.text import clean as text_module
from scrapy_zhdedup.text import junk
from tests.support import zhtexts

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
    from scrapy_zhdedup.similarity.simhash import md5 as used

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


def _old_sketch(text: str) -> Sketch:
    h = _old_shingle_hashes(text)
    width = (1 << 32) // SKETCH_SIZE
    starts = np.arange(SKETCH_SIZE, dtype=np.uint64) * np.uint64(width)
    first = np.minimum(np.searchsorted(h, starts), len(h) - 1)
    offsets = h[first] - starts
    filled = (h[first] >= starts) & (offsets < np.uint64(width))
    shift = np.uint64(max(0, width.bit_length() - 17))
    values = np.where(filled, np.minimum(offsets >> shift, sketch.EMPTY - 1), sketch.EMPTY).astype(np.uint16)
    return Sketch(values, len(h))


def _old_key_view(values: np.ndarray) -> np.ndarray:
    """The 64-bin view, vectorised: the first bin of each pair when filled, else the second's half-offset."""
    first, second = values[0::2].astype(np.uint32), values[1::2].astype(np.uint32)
    view = np.where(first != sketch.EMPTY, first >> 1,
                    np.where(second != sketch.EMPTY, np.minimum(0x8000 | (second >> 1), sketch.EMPTY - 1), sketch.EMPTY))
    return view.astype(np.uint16)


def _old_band_keys(s: Sketch) -> list[int]:
    values = _old_key_view(s.values)
    filled_at = np.flatnonzero(values != sketch.EMPTY)
    if not len(filled_at):
        dense = values.astype(np.uint64)
    else:
        idx = np.arange(len(values))
        nxt = filled_at[np.searchsorted(filled_at, idx) % len(filled_at)]
        dense = values[nxt].astype(np.uint64) + (((nxt - idx) % len(values)).astype(np.uint64) << np.uint64(16))
    v = dense[: sketch.ROWS * sketch.BANDS].reshape(sketch.BANDS, sketch.ROWS)
    key = np.arange(sketch.BANDS, dtype=np.uint64) + np.uint64(1)
    for r in range(sketch.ROWS):
        key = key * sketch._PRIME + v[:, r]
        key ^= key >> np.uint64(29)
        key *= sketch._MIX
    return ((key >> np.uint64(32)) & np.uint64(0xFFFFFFFF)).tolist()


def _old_estimate_many(s: Sketch, values: np.ndarray, shingles: np.ndarray) -> list[sketch.Overlap]:
    a = s.values[None, :]
    fa, fb = a != sketch.EMPTY, values != sketch.EMPTY
    equal = np.count_nonzero(fa & fb & (a == values), axis=1)
    either = np.count_nonzero(fa | fb, axis=1)
    owned_by_a = np.count_nonzero(fa & (~fb | (a <= values)), axis=1)
    jaccard = np.where(either > 0, equal / np.maximum(either, 1), 0.0)
    by_bins = np.where(owned_by_a >= sketch.MIN_SUPPORT, equal / np.maximum(owned_by_a, 1), jaccard)
    by_counts = np.minimum(1.0, jaccard * (s.shingles + shingles) / ((1 + jaccard) * max(s.shingles, 1)))
    contained = (by_bins + by_counts) / 2
    return [sketch.Overlap(float(j), float(c), s.shingles, int(m)) for j, c, m in zip(jaccard, contained, shingles)]


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


def _sketches_with_edge_layouts(inputs: list[str]) -> list[Sketch]:
    """Real sketches, plus no bin filled, one filled at either end, all filled, and maximal values."""
    rng = np.random.default_rng(5)
    odd = []
    for filled in ([], [0], [SKETCH_SIZE - 1], [31, 32], list(range(SKETCH_SIZE)), [5, 40]):
        values = np.full(SKETCH_SIZE, sketch.EMPTY, dtype=np.uint16)
        values[filled] = rng.integers(0, sketch.EMPTY, size=len(filled))
        odd.append(Sketch(values, len(filled)))
    odd.append(Sketch(np.full(SKETCH_SIZE, sketch.EMPTY - 1, dtype=np.uint16), 10**6))
    return odd + [sketch.sketch(t) for t in inputs]


def test_band_keys_equal_the_old_ones(inputs: list[str]) -> None:
    for s in _sketches_with_edge_layouts(inputs):
        assert sketch.band_keys(s) == _old_band_keys(s)


def _plain_band_keys(s: Sketch) -> list[int]:
    """The band keys in plain Python, one value at a time (the implementation before the numpy one)."""
    values, empty = s.values.tolist(), sketch.EMPTY
    view = []
    for first, second in zip(values[0::2], values[1::2]):
        if first != empty:
            view.append(first >> 1)
        elif second != empty:
            view.append(min(0x8000 | (second >> 1), empty - 1))
        else:
            view.append(empty)
    filled = [i for i, v in enumerate(view) if v != empty]
    dense = view[: sketch.ROWS * sketch.BANDS]
    if filled:
        dense = []
        for i in range(sketch.ROWS * sketch.BANDS):
            nxt = next((j for j in filled if j >= i), filled[0] + len(view))
            dense.append(view[nxt % len(view)] + ((nxt - i) << 16))
    keys = []
    for band in range(sketch.BANDS):
        key = band + 1
        for value in dense[band * sketch.ROWS : (band + 1) * sketch.ROWS]:
            key = (key * int(sketch._PRIME) + value) % 2**64
            key ^= key >> 29
            key = key * int(sketch._MIX) % 2**64
        keys.append(key >> 32)
    return keys


def test_band_keys_equal_plain_python_on_random_sketches(inputs: list[str]) -> None:
    """Random sketches from all bins filled to none (short texts: most bins EMPTY), values up to EMPTY - 1,
    and the sketches of real and random texts of every length."""
    rng = np.random.default_rng(40)
    sketches = _sketches_with_edge_layouts(inputs)
    for _ in range(3000):
        filled = rng.choice(SKETCH_SIZE, size=int(rng.choice([rng.integers(0, 8), rng.integers(0, SKETCH_SIZE + 1)])),
                            replace=False)
        values = np.full(SKETCH_SIZE, sketch.EMPTY, dtype=np.uint16)
        values[filled] = rng.integers(0, sketch.EMPTY, size=len(filled))
        sketches.append(Sketch(values, len(filled)))
    for s in sketches:
        assert sketch.band_keys(s) == _plain_band_keys(s), s.values.tolist()


def _edited(s: Sketch, rng: random.Random) -> Sketch:
    """A near copy of ``s`` (a few bins emptied, filled or changed; a few more or fewer shingles),
    so every count lands near the thresholds: equal bins, owned bins around MIN_SUPPORT."""
    values = s.values.copy()
    for i in rng.sample(range(SKETCH_SIZE), rng.randrange(0, 12)):
        values[i] = rng.choice([sketch.EMPTY, rng.randrange(sketch.EMPTY), max(0, int(values[i]) - 1)])
    return Sketch(values, max(0, s.shingles + rng.randrange(-5, 6)))


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

    from scrapy_zhdedup.similarity.words import cut

    return " ".join(w.lower() for w in cut(text) if re.search(r"[\w\u3400-\u9fff]", w))


def test_search_words_equal_the_old_ones(inputs: list[str]) -> None:
    from es_plugin.index.chinese import segment

    cased = ["ΟΔΟΣ ΟΔΟΣΑ Σ ΣΑ", "İstanbul İİ", "ǅemal ǄEMAL", "ＡＢＣ abc ΑΒΓ", "Straße STRASSE"]
    for text in [*inputs, *cased]:
        assert segment(text) == _old_segment(text)


# --- cleaning ------------------------------------------------------------------------------------

_SPACE_KINDS = "".join(chr(c) for c in range(0x110000) if chr(c).isspace())


def _spaced_text(rng: random.Random) -> str:
    pieces = ["中", "文", "a", "Z", "1", "，", "：", "（", "）", "！", "？", "；", "。", "…", "\u3000", "ｶ", "ﾞ", "Ａ",
              "\u200b", "國", "\n", "\n\n", " ", "  ", *_SPACE_KINDS]
    return "".join(rng.choice(pieces) for _ in range(rng.randrange(0, 40)))


@pytest.fixture(scope="module")
def spaced(inputs: list[str]) -> list[str]:
    rng = random.Random(20261123)
    return [*inputs, *_SPACE_KINDS, "\n".join(_SPACE_KINDS), *(_spaced_text(rng) for _ in range(3000))]


def _old_collapse(text: str) -> str:
    text = re.sub(r"[^\S\n]+", " ", text)
    return re.sub(r"\s*\n\s*", "\n", text).strip()


def _old_narrowed(text: str) -> str:
    return re.sub("[\uff01-\uff5e\u3000\u2026]+", lambda m: m.group().translate(text_module._WIDE_NFKC), text)


def test_space_collapsing_equals_the_old_substitutions(spaced: list[str]) -> None:
    assert "\n" in _SPACE_KINDS and "\u3000" in _SPACE_KINDS and "\x1f" in _SPACE_KINDS
    for text in spaced:
        assert text_module._collapse_spaces(text) == _old_collapse(text), repr(text)


def test_normalised_text_and_content_hash_equal_the_old_ones(spaced: list[str]) -> None:
    for simplify in (True, False):
        cleaner = text_module.TextCleaner(traditional_to_simplified=simplify)
        for text in spaced:
            if unicodedata.is_normalized("NFKC", text):
                old = text
            else:
                narrow = _old_narrowed(text)
                old = narrow if unicodedata.is_normalized("NFKC", narrow) else unicodedata.normalize("NFKC", text)
            old = re.sub("[\u200b\u200c\u200d\u2060\ufeff\u00ad]", "", old)
            if simplify and re.search(r"[\u3400-\u9fff\uf900-\ufaff]", old):
                old = cleaner._opencc.convert(old)
            assert cleaner.normalise(text) == _old_collapse(old), repr(text)
            digest = blake2b(re.sub(r"\s+", "", text).encode("utf-8"), digest_size=16).hexdigest()
            assert text_module.content_hash(text) == digest, repr(text)


# --- TF-IDF words ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def old_idf() -> tuple[dict[str, float], float]:
    import importlib.util
    import os

    spec = importlib.util.find_spec("jieba")
    assert spec is not None and spec.origin is not None
    with open(os.path.join(os.path.dirname(spec.origin), "analyse", "idf.txt"), encoding="utf-8") as fh:
        tokens = fh.read().split()
    words, values = tokens[0::2], tokens[1::2]
    number = {value: float(value) for value in set(values)}
    table = dict(zip(words, map(number.__getitem__, values)))
    ordered = sorted(table.values())
    return table, ordered[len(ordered) // 2]


def _old_words(text: str, old_idf: tuple[dict[str, float], float]) -> dict[str, int]:
    import math

    from scrapy_zhdedup.similarity.words import _HAS_CJK, HAS_WORD, STOPWORDS, WEIGHT_SCALE, cut

    idf, median = old_idf
    out: dict[str, int] = {}
    for word, n in Counter(cut(text)).items():
        votes = bool(HAS_WORD.search(word)) and word not in STOPWORDS and not (len(word) == 1 and _HAS_CJK.match(word))
        base = idf.get(word, median) * WEIGHT_SCALE if votes else 0.0
        weight = min(MAX_WEIGHT, max(1, round(base))) if votes else 0
        if weight:
            out[word] = weight if n == 1 else min(MAX_WEIGHT, round(base * (1 + math.log(n))))
    return out


def test_words_equal_the_old_ones(inputs: list[str], old_idf: tuple[dict[str, float], float]) -> None:
    featurizer = Featurizer("words")
    for text in [*inputs, *(a.text for a in zhtexts.articles(60)), *inputs]:  # learned, then from the caches
        old = _old_words(text, old_idf)
        assert featurizer.words(text) == (old if old else featurizer.chars(text)), repr(text[:50])


# --- main text of a page ----------------------------------------------------------------------------


def _old_main_text(page: str) -> str:
    """The extraction on lxml.html's parser and element methods (drop_tree, text_content)."""
    import itertools

    import lxml.html
    from lxml import etree

    def blocks(drop_marked: bool) -> str:
        try:
            root = lxml.html.document_fromstring(page)
        except (etree.ParserError, ValueError):
            try:
                root = lxml.html.document_fromstring(page.encode("utf-8", "replace"),
                                                     parser=lxml.html.HTMLParser(encoding="utf-8"))
            except etree.ParserError:
                return ""
        etree.strip_elements(root, etree.Comment, *text_module._DROP_TAGS, with_tail=False)
        for el in list(root.iter()) if drop_marked else ():
            if not isinstance(el.tag, str) or el.getparent() is None:
                continue
            marks = f"{el.get('class', '')} {el.get('id', '')}"
            boilerplate = junk.class_words(text_module._BOILERPLATE_WORDS)
            if marks.strip() and boilerplate.search(marks) and el.tag not in ("body", "html"):
                el.drop_tree()
        lines = []
        for el in root.iter():
            if not isinstance(el.tag, str) or (el.tag not in text_module._BLOCKS and el.tag != "body") or el.tag == "br":
                continue
            if not ((el.text and el.text.strip()) or any(
                isinstance(c.tag, str) and c.tag not in text_module._BLOCKS
                and (c.text_content().strip() or (c.tail or "").strip()) for c in el
            ) or any((c.tail or "").strip() for c in el)):
                continue
            text = text_module._block_text(el)
            linked = sum(len(a.text_content()) for a in el.iter("a"))
            if text and linked / len(text) < 0.5:
                lines.append(text)
        return "\n".join(lines)

    text = blocks(True)
    if next(itertools.islice(text_module._wordlike().finditer(text), 19, None), None) is None:
        text = blocks(False)
    return text


def _tag_soup(rng: random.Random, depth: int = 0) -> str:
    tags = ["div", "p", "span", "a", "b", "li", "ul", "td", "section", "em", "h2", "br", "article", "font"]
    marks = ["", "", ' class="content"', ' class="nav"', ' id="footer"', ' class="info"', ' class="side-bar"',
             ' class="hot list"', ' id="main"']
    bits = []
    for _ in range(rng.randrange(1, 5)):
        kind = rng.random()
        if kind < 0.4 and depth < 5:
            tag = rng.choice(tags)
            bits.append(f"<{tag}{rng.choice(marks)}>{_tag_soup(rng, depth + 1)}</{tag}>")
        elif kind < 0.5:
            bits.append(rng.choice(["<!-- 注释 -->", "<?php echo 1 ?>", "<script>var a='脚本';</script>", "&amp;",
                                    "&#20013;", "<br/>", "<p>", "</div>", "<![CDATA[x]]>", "\x00"]))
        else:
            bits.append(rng.choice(["新闻", "正文内容在这里，", "  ", "\n", "相关阅读", "text ", "。"]) * rng.randrange(1, 8))
    return "".join(bits)


def test_main_text_equals_the_old_extraction() -> None:
    rng = random.Random(20261123)
    pages = [zhtexts.news_page(a.title, a.text, site=site) for a in zhtexts.articles(30) for site in ("xinwen", "caijing")]
    pages += [_tag_soup(rng) for _ in range(2000)]
    pages += ["", "   ", "<!-- -->", "<html></html>", "<?xml version='1.0' encoding='gbk'?><p>中文内容</p>",
              "<html><body class='info'><p>" + "正文" * 20 + "</p></body></html>"]
    news = len(pages) - 2000 - 6
    for number, page in enumerate(pages):
        try:
            text = text_module._lxml_main_text(page)
        except JunkError:  # all its text in blocks marked as the site's furniture (junk.py), which it returned
            assert news <= number < news + 2000, repr(page[:200])  # tag soup only, never a news page
            assert text_module._few_words(text_module._lxml_blocks(page, text_module._marked))  # nothing outside
            continue
        assert text == _old_main_text(page), repr(page[:200])
