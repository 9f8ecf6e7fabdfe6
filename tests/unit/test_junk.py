"""Junk is not a document (text/junk.py): binary data served as a page and a page that is only its site's
furniture are refused with JunkError, skipped like an empty page; pages with an article never are."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from scrapy_zhdedup.cli.main import main
from scrapy_zhdedup.errors import EmptyTextError, JunkError
from scrapy_zhdedup.text.clean import TextCleaner
from tests.support import zhtexts
from tests.support.helpers import write_jsonl

ARTICLE = zhtexts.articles(1)[0]
BINARY = "binary data, not text"
FURNITURE = "no main text: only the site's header, footer, navigation and sidebar"


@pytest.fixture(scope="module")
def cleaner() -> TextCleaner:
    return TextCleaner()


@pytest.mark.parametrize("page", [
    zhtexts.binary_page(),  # bytes: decoded as a browser would
    zhtexts.binary_page(1).decode("latin-1"),  # as text, decoded by a server that said ISO-8859-1
    gzip.compress(ARTICLE.text.encode("utf-8")),  # a compressed body served without Content-Encoding
], ids=["png-bytes", "latin-1", "gzip"])
def test_binary_data_is_not_a_page(cleaner: TextCleaner, page: str | bytes) -> None:
    """Judged before: a `unique` document of control characters and U+FFFD."""
    with pytest.raises(JunkError, match=BINARY):
        cleaner.clean(html=page)


@pytest.mark.parametrize("site", ["xinwen", "caijing", "difang"])
def test_a_page_of_only_header_footer_and_sidebar_is_not_a_page(cleaner: TextCleaner, site: str) -> None:
    """Judged before: its top bar, sidebar and footer as the text (each such page a repeat of the first)."""
    with pytest.raises(JunkError, match=FURNITURE):
        cleaner.clean(html=zhtexts.furniture_page(site))


def test_articles_in_marked_blocks_and_short_pages_are_still_pages(cleaner: TextCleaner) -> None:
    text = cleaner.clean(text=ARTICLE.text)
    paragraphs = "".join(f"<p>{p}</p>" for p in zhtexts.paragraphs(ARTICLE.text))
    footer = '<div class="footer"><p>关于我们 | 联系我们</p><p>Copyright 2019 金桥财经网 版权所有</p></div>'
    for page in (f'<html><body><div id="top">{paragraphs}</div>{footer}</body></html>',  # a page-wide wrapper
                 f'<html><body><div class="info">{paragraphs}</div>{footer}</body></html>'):  # the article in "info"
        assert "".join(text.split()) in "".join(cleaner.clean(html=page).split())
    assert cleaner.clean(html="<p>你好</p>") == "你好"  # a short page, no furniture: judged as before
    assert "含有空字节的页面正文" in cleaner.clean(html="\x00<p>含有空字节的页面正文</p>")  # a stray NUL is not binary
    with pytest.raises(EmptyTextError) as empty:
        cleaner.clean(html="<html><body><img src=a.png></body></html>")
    assert not isinstance(empty.value, JunkError)  # an empty page stays an empty page


def test_scan_skips_junk_like_an_empty_page_naming_why(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      caplog: pytest.LogCaptureFixture) -> None:
    source = write_jsonl(tmp_path / "in.jsonl", [
        {"id": "article", "text": ARTICLE.text},
        {"id": "image", "html": zhtexts.binary_page().decode("latin-1")},
        {"id": "chrome", "html": zhtexts.furniture_page()},
    ])
    assert main(["scan", str(source), "--workers", "1"]) == 0
    out, err = capsys.readouterr()
    assert [json.loads(line)["id"] for line in out.splitlines()] == ["article"]
    assert f"skipped {source}:2: not a document (binary data, not text: " in caplog.text
    assert f"skipped {source}:3: not a document ({FURNITURE})" in caplog.text
    assert "zhdedup scan: 1 judged (1 unique, 0 exact, 0 near), 2 bad lines skipped" in err


def test_a_class_is_judged_once_per_template_yet_body_and_html_are_never_marked() -> None:
    """marked() keeps its answers by class and id text (a site's pages share a template); the tag rule is
    still asked of every element, so the same class on ``body`` is not boilerplate where a div's is."""
    from lxml import etree

    from scrapy_zhdedup.text import junk

    root = etree.fromstring('<html class="nav"><body class="nav"><div class="nav">x</div><div class="Side-Bar">y</div>'
                            '<div id="main">z</div></body></html>', etree.HTMLParser())
    html, body, nav, side, main = root.iter(etree.Element)
    for _ in range(2):  # the second time from what was kept
        assert [junk.marked(el, junk.FURNITURE_WORDS) for el in (html, body, nav, side, main)] == \
            [False, False, True, True, False]
    long_class = etree.fromstring(f'<div class="{"x" * junk.CACHED_MARKS} nav">z</div>', etree.HTMLParser())[0][0]
    kept = junk._names.cache_info().currsize
    assert junk.marked(long_class, junk.FURNITURE_WORDS)  # a class of any length is asked, but not kept
    assert junk._names.cache_info().currsize == kept
