"""The t2s shortcut (text/t2s.py): a text it lets skip OpenCC is one OpenCC would leave as it is."""

from __future__ import annotations

import shutil
from pathlib import Path

import opencc

from scrapy_zhdedup.text import t2s
from tests.support import zhtexts

T2S = opencc.OpenCC("t2s")
CONFIG = Path(T2S.config)
ARTICLES = [a.text for a in zhtexts.articles(200)]
# Keys of each kind: a converting character, phrases found by such a character, and phrases of characters
# that convert to themselves alone (沈, 覆, 坏, 瞭), inside simplified text.
KEYS = ["這", "么麼", "沈默寡言", "反覆", "捏坏", "一目瞭然", "沈\u200b默"]


def test_a_text_that_skips_the_conversion_is_one_it_leaves_alone() -> None:
    changes = t2s.convertible(CONFIG)
    texts = [*ARTICLES, *map(zhtexts.traditional, ARTICLES[:50])]
    texts += [f"{a[:100]}{key}{a[100:200]}" for a in ARTICLES[:20] for key in KEYS]
    skipped = [text for text in texts if not changes(text)]
    assert len(skipped) > len(ARTICLES) // 2  # the shortcut is taken for most simplified texts
    assert all(T2S.convert(text) == text for text in skipped)
    assert all(changes(f"这是{key.replace(chr(0x200B), '')}的") for key in KEYS)


def test_other_dictionaries_convert_every_text(tmp_path: Path) -> None:
    for path in (CONFIG, *t2s.dictionaries(CONFIG)):
        shutil.copy(path, tmp_path / path.name)
    (tmp_path / "TSPhrases.ocd2").write_bytes((tmp_path / "TSPhrases.ocd2").read_bytes() + b"\0")
    assert t2s.convertible(tmp_path / CONFIG.name)(ARTICLES[0])
    assert t2s.convertible(tmp_path / "missing.json")(ARTICLES[0])


def test_a_phrase_is_found_wherever_it_stands() -> None:
    """Phrases are looked for only around their character (t2s.py): at the start and end of a text, cut at
    either end, twice, or overlapping a cut copy, the answer is that of a search of the whole text."""
    from scrapy_zhdedup.text import t2s_keys

    changes = t2s.convertible(CONFIG)
    for phrase in t2s_keys.PHRASES:
        for text in (phrase, f"这{phrase}", f"{phrase}的", phrase[1:], phrase[:-1], phrase[1:] + phrase,
                     f"{phrase[:-1]}。{phrase[1:]}", phrase + phrase):
            expected = any(p in text for p in t2s_keys.PHRASES) or any(c in t2s_keys.CHARACTERS for c in text)
            assert changes(text) == expected, (phrase, text)
