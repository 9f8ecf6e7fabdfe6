"""Weighted SimHash features: TF-IDF words for articles, character shingles for short texts."""

from __future__ import annotations

import random
import re

import pytest

from scrapy_zhdedup.similarity.words import _KEEP_CHARS, MAX_WEIGHT, STOPWORDS, Featurizer
from scrapy_zhdedup.text.clean import TextCleaner
from tests.support import zhtexts

_CJK = re.compile(r"[\u3400-\u9fff]")
_WORD = re.compile(r"[\w\u3400-\u9fff]")


@pytest.fixture(scope="module")
def cleaned() -> list[str]:
    cleaner = TextCleaner()
    return [cleaner.clean(text=a.text) for a in zhtexts.articles(200)]


@pytest.fixture(scope="module")
def short_cleaned() -> list[str]:
    cleaner = TextCleaner()
    return [cleaner.clean(text=a.text) for a in zhtexts.articles(50, min_chars=40, max_chars=150)]


def test_auto_uses_chars_below_the_threshold_and_words_above(cleaned: list[str], short_cleaned: list[str]) -> None:
    auto = Featurizer("auto", short_text_chars=200)
    for text in short_cleaned:
        assert auto.mode_for(text) == "chars"
    for text in cleaned:
        assert auto.mode_for(text) == "words"


def test_auto_threshold_counts_word_characters_only() -> None:
    auto = Featurizer("auto", short_text_chars=10)
    assert auto.mode_for("国家统计局发布数据称经济") == "words"  # 12 characters
    assert auto.mode_for("国家统计局，发布数据。") == "chars"  # 9 characters and 2 marks
    assert auto.mode_for("一二三四五六七八九十") == "words"  # exactly the threshold
    assert auto.mode_for("一二三四五六七八九") == "chars"


def test_auto_decides_as_if_it_stripped_the_whole_text() -> None:
    """Mostly punctuation, word characters spread or piled at the end: the prefix shortcut never
    changes the answer of counting every word character."""
    rng = random.Random(7)
    auto = Featurizer("auto", short_text_chars=20)
    for _ in range(3000):
        marks = rng.choice([0.5, 0.9, 0.97, 1.0])
        text = "".join(rng.choice("，。 ！…") if rng.random() < marks else rng.choice("经济数据ab1") for _ in
                       range(rng.randrange(20, 400)))
        if rng.random() < 0.3:
            text += "数" * rng.randrange(0, 25)
        assert auto.mode_for(text) == ("chars" if len(_KEEP_CHARS.sub("", text)) < 20 else "words"), text


def test_fixed_modes_ignore_length(short_cleaned: list[str], cleaned: list[str]) -> None:
    assert Featurizer("words").mode_for(short_cleaned[0]) == "words"
    assert Featurizer("chars").mode_for(cleaned[0]) == "chars"


def test_words_drop_punctuation_stopwords_and_lone_chinese_characters(cleaned: list[str]) -> None:
    words = Featurizer("words")
    for text in cleaned:
        features = words.words(text)
        assert features
        for token in features:
            assert _WORD.search(token), token
            assert token not in STOPWORDS, token
            assert not (len(token) == 1 and _CJK.match(token)), token


def test_words_keep_content_words_of_a_real_sentence() -> None:
    features = Featurizer("words").words("国家统计局今天发布数据，一季度国内生产总值同比增长百分之六点四。")
    assert {"国家统计局", "发布", "数据", "一季度", "生产总值", "同比", "增长"} <= set(features)
    assert not {"，", "。", "今天"} & set(features)  # punctuation and a stopword


def test_weights_are_integers_between_1_and_255(cleaned: list[str], short_cleaned: list[str]) -> None:
    featurizer = Featurizer()
    for text in cleaned + short_cleaned:
        for features in (featurizer.words(text), featurizer.chars(text)):
            assert all(type(w) is int and 1 <= w <= MAX_WEIGHT for w in features.values())


def test_rare_words_weigh_more_than_common_ones() -> None:
    features = Featurizer("words").words("经济发展离不开区块链技术，发展经济需要人民币试点。")
    assert features["区块"] > features["经济"]
    assert features["试点"] > features["需要"]


def test_repeats_raise_a_weight_sublinearly_and_never_past_255() -> None:
    words = Featurizer("words")
    weights = [words.words("、".join(["生产总值"] * n) + "。")["生产总值"] for n in (1, 2, 4, 100, 100_000)]
    assert weights == sorted(weights)
    assert weights[1] < 2 * weights[0]
    assert weights[-1] == MAX_WEIGHT


def test_text_of_only_single_characters_still_yields_features() -> None:
    text = "天 地 人 和 风 雨 雷 电 山 水 火 土 " * 20
    assert Featurizer().mode_for(text) == "words"  # 240 characters, each its own word
    features = Featurizer("words").words(text)
    assert features and features == Featurizer().chars(text)


def test_chars_are_lowercased_shingles_without_punctuation() -> None:
    chars = Featurizer("chars", shingle_size=3)
    assert chars.chars("GDP，增长！") == {"gdp": 1, "dp增": 1, "p增长": 1}
    assert chars.chars("增长") == {"增长": 1}  # shorter than a shingle: the whole text
    assert chars.chars("，。！") == {}
    assert chars.chars("哈哈哈哈哈") == {"哈哈哈": 3}
    assert Featurizer("chars", shingle_size=1).chars("北京北京") == {"北": 2, "京": 2}


def test_features_are_deterministic(cleaned: list[str]) -> None:
    a, b = Featurizer(), Featurizer()
    for text in cleaned[:50]:
        assert a.words(text) == b.words(text) == a.words(text)


def test_english_text_has_word_features() -> None:
    features = Featurizer("words").words("The National Bureau of Statistics said GDP grew 6.4 percent")
    assert {"National", "Bureau", "Statistics", "GDP", "6.4"} <= set(features)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"mode": "ngrams"}, "unknown feature mode"),
    ({"shingle_size": 0}, "shingle_size"),
])
def test_bad_settings_are_refused(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Featurizer(**kwargs)
