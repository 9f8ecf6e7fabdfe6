"""Weighted features for SimHash: TF-IDF words for articles, character shingles for short texts.

Words weighted by TF-IDF let the rare, content-bearing words decide the fingerprint, so shared
boilerplate and function words move it little (the keyword-weighting finding of the seeds).
Below a length threshold a text has too few words for that to be stable, and one edited
character changes a whole word; overlapping character n-grams degrade more gracefully there.
Segmentation uses rjieba (jieba-rs: jieba's dictionary and algorithm, ~18x faster than jieba
here, 99.4 % token agreement); the IDF table is jieba's own.
"""

from __future__ import annotations

import importlib.util
import math
import os
import re
from collections import Counter
from functools import cache, lru_cache
from typing import Literal

from ..config import WordMode
from ..errors import ConfigError

_KEEP_CHARS = re.compile(r"[^\w\u3400-\u9fff]+")
_HAS_CJK = re.compile(r"[\u3400-\u9fff]")
HAS_WORD = re.compile(r"[\w\u3400-\u9fff]")  # a word character: what the fingerprint and the search words keep
# Weight = (1 + ln tf) * idf, scaled and rounded to an integer in 1..255.  Integers keep the
# fingerprint exact (see simhash.py); <= 255 keeps it computable by the `simhash` package,
# whose uint8 bit arrays overflow above that under numpy 2; sublinear tf stops one repeated
# word from outvoting the rest of the article.
WEIGHT_SCALE = 3
MAX_WEIGHT = 255
# Words whose weight is cached, per process (cleared when full).  benchmarks caches: 20k news documents use
# 172k distinct words (hit rate 0.98 when all fit, 0.92 at 100k); an entry costs ~145 bytes and a miss
# ~30 µs, so 500k entries (~70 MB) keep the rate near its ceiling on long crawls at a bounded cost.
_CACHE_LIMIT = 500_000

# High-frequency function words; jieba's IDF table already down-weights them, dropping them
# outright keeps them from voting at all.
STOPWORDS = frozenset(
    ["的", "了", "是", "在", "和", "与", "及", "或", "也", "都", "而", "又", "就", "但", "并", "对", "把", "被", "让", "给", "从", "向", "到", "为", "以", "于", "之", "其", "此", "这", "那", "这个", "那个", "这些", "那些", "一个", "我们", "你们", "他们", "她们", "它们", "我", "你", "他", "她", "它", "自己", "什么", "怎么", "如何", "因为", "所以", "如果", "虽然", "但是", "而且", "并且", "或者", "还是", "已经", "正在", "可以", "能够", "没有", "不是", "就是", "还有", "以及", "通过", "进行", "表示", "认为", "相关", "其中", "其他", "目前", "今年", "今天", "日前", "记者", "报道", "编辑", "来源", "本报", "讯"]
)


@cache
def _idf() -> tuple[dict[str, str], float]:
    """jieba's IDF table (word -> its value as written; converted when a word is first weighted) and
    its median (the weight of a word it does not know).

    Every process pays this at start-up, before its first document: one split and a dict of the
    strings, the median from the ~3,300 distinct values' counts.  Converting all 270k values and
    sorting them took ~0.20 s in a fresh process; this takes ~0.16 s (a marshal dump of the table
    takes ~0.14 s to load, so it is not cached on disk)."""
    # Located, not imported: importing jieba.analyse loads its POS tagger and a second IDF copy.
    spec = importlib.util.find_spec("jieba")
    if spec is None or spec.origin is None:
        raise ImportError("jieba is required for its IDF table (pip install jieba)")
    path = os.path.join(os.path.dirname(spec.origin), "analyse", "idf.txt")
    with open(path, encoding="utf-8") as fh:
        tokens = iter(fh.read().split())  # "word value" per line; no word holds a space
    table = dict(zip(tokens, tokens))
    counts = Counter(table.values())
    below = 0
    for value in sorted(counts, key=float):  # the value at position len // 2 of the sorted values
        below += counts[value]
        if below > len(table) // 2:
            return table, float(value)
    raise ImportError(f"jieba's IDF table {path} is empty")


@lru_cache(maxsize=1)
def cut(text: str) -> tuple[str, ...]:
    """jieba words of ``text`` (rjieba).  The last text's words are kept: ``es ingest`` and the pipeline
    segment each text twice, for its fingerprint and for search (es_plugin/index/chinese.py)."""
    import rjieba

    return tuple(rjieba.cut(text))


def load_dictionaries() -> None:
    """Load rjieba's dictionary and jieba's IDF table now (~0.3 s, ~90 MiB) rather than at the first text:
    a pool loads them once before its workers fork, so they share them and start ready (workers.py)."""
    load_segmenter()
    _idf()


def load_segmenter() -> None:
    """Load rjieba's dictionary now, without the IDF table: all that segmenting for search needs
    (es_plugin/index/chinese.py); the table, millions of objects, is only for word fingerprints."""
    cut("预热")


class Featurizer:
    def __init__(self, mode: WordMode = "auto", *, short_text_chars: int = 200, shingle_size: int = 3) -> None:
        if mode not in ("auto", "words", "chars"):
            raise ConfigError(f"unknown feature mode {mode!r}: use 'auto', 'words' or 'chars'")
        if shingle_size < 1:
            raise ConfigError("shingle_size must be >= 1")
        self.mode = mode
        self.short_text_chars = short_text_chars
        self.shingle_size = shingle_size
        self._bases: dict[str, float] = {}  # word -> scaled IDF
        self._single: dict[str, int] = {}  # word -> weight at tf 1 (0 = does not vote)
        self._by_value: dict[str | None, tuple[float, int]] = {}  # IDF as written (None: unknown) -> both

    def mode_for(self, text: str) -> Literal["words", "chars"]:
        if self.mode != "auto":
            return self.mode
        n = self.short_text_chars
        if len(text) < n:  # cheap answer before stripping punctuation
            return "chars"
        # Word characters add up over any split of the text: most texts are decided on a prefix a
        # little longer than n (stripping a whole article cost ~50 µs), the rest in doubling pieces.
        kept, start, size = 0, 0, n + n // 4
        while kept < n and start < len(text):
            kept += len(_KEEP_CHARS.sub("", text[start : start + size]))
            start += size
            size *= 2
        return "words" if kept >= n else "chars"

    def words(self, text: str) -> dict[str, int]:
        single, bases = self._single, self._bases
        out: dict[str, int] = {}
        for word, n in Counter(cut(text)).items():
            w = single.get(word)
            if w is None:
                w = self._learn(word)
            if w:  # most words occur once: their weight is precomputed
                out[word] = w if n == 1 else min(MAX_WEIGHT, round(bases[word] * (1 + math.log(n))))
        return out if out else self.chars(text)  # a text of lone characters: still judged

    def _learn(self, word: str) -> int:
        """Cache the word's scaled IDF; weight 0 for a token that does not vote
        (punctuation, stopword, lone CJK character).  Runs for every new word (~50 per news text
        early in a run), so the common answers come first: isalnum() (which implies a word character)
        before the regex, and the weights of each distinct IDF value computed once."""
        if len(self._single) >= _CACHE_LIMIT:
            self._single.clear()
            self._bases.clear()
        if (word.isalnum() or HAS_WORD.search(word)) and word not in STOPWORDS and not (
            len(word) == 1 and _HAS_CJK.match(word)
        ):
            idf, median = _idf()
            value = idf.get(word)
            known = self._by_value.get(value)
            if known is None:
                base = (median if value is None else float(value)) * WEIGHT_SCALE
                known = self._by_value[value] = (base, min(MAX_WEIGHT, max(1, round(base))))
            self._bases[word], self._single[word] = known
            return known[1]
        self._bases[word] = 0.0
        self._single[word] = 0
        return 0

    def chars(self, text: str) -> dict[str, int]:
        compact = _KEEP_CHARS.sub("", text).lower()
        n = min(self.shingle_size, len(compact))
        if n == 0:
            return {}
        shingles = len(compact) - n + 1
        counts = Counter([compact[i : i + n] for i in range(shingles)])  # a list: faster than a generator here
        if shingles <= MAX_WEIGHT:  # no count can exceed the cap (every short text): nothing to clamp
            return dict(counts)
        return {g: min(MAX_WEIGHT, c) for g, c in counts.items()}
