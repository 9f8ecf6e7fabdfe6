"""The corpus the report tests judge (embedded and Elasticsearch alike), and how they read the page."""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

from scrapy_zhdedup.cli.main import main
from tests.support.helpers import write_jsonl
from tests.support.zhtexts import articles, edit_chars, news_page, traditional, with_attribution

TRICKY = 'x/<script>alert("id")</script>'


def corpus() -> list[dict[str, Any]]:
    """Six articles; one with three repeats (an exact copy, a repost with a source line, two edited
    characters), one with a repost in traditional characters, one repeated under an id that is markup."""
    a = articles(6, max_chars=900)
    return [
        {"id": "a/0", "text": a[0].text}, {"id": "a/1", "text": a[1].text}, {"id": "a/2", "text": a[2].text},
        {"id": "b/0-copy", "text": a[0].text},
        {"id": "c/0-repost", "html": news_page(a[0].title, with_attribution(a[0].text), site="caijing")},
        {"id": "a/3", "text": a[3].text},
        {"id": "d/0-typo", "text": edit_chars(a[0].text, 2, 7)},
        {"id": "b/1-traditional", "text": traditional(a[1].text)},
        {"id": "a/4", "text": a[4].text}, {"id": TRICKY, "text": edit_chars(a[2].text, 1, 3)},
        {"id": "a/5", "text": a[5].text},
    ]


def scanned(tmp_path: Path) -> tuple[Path, Path]:
    """:func:`corpus` written to ``tmp_path`` and scanned: the input and the verdicts."""
    source = write_jsonl(tmp_path / "corpus.jsonl", corpus())
    verdicts = tmp_path / "verdicts.jsonl"
    assert main(["scan", str(source), "-o", str(verdicts), "--workers", "1"]) == 0
    return source, verdicts


def clusters_of(page: str) -> list[int]:
    """The sizes of the clusters a report shows, in its order."""
    return [int(n) for n in re.findall(r'<section class="cluster" id="c\d+" data-size="(\d+)"', page)]


def member(page: str, doc_id: str) -> dict[str, str]:
    """A repeat as the report shows it: its badge, what decided, and both texts as HTML."""
    found = re.search(r'<details class="member"[^>]*><summary><span class="badge [^"]*">([^<]*)</span>'
                      rf'<span class="id">{re.escape(html.escape(doc_id))}</span>.*?<span class="why">· ([^<]*)</span>'
                      r'.*?<h3>original</h3><div class="text">(.*?)</div></div><div><h3>this repeat</h3>'
                      r'<div class="text">(.*?)</div>', page, re.S)
    assert found, f"{doc_id} is not shown"
    status, why, original, repeat = found.groups()
    return {"status": status, "why": html.unescape(why), "original": original, "repeat": repeat}


def text_of(pieces_html: str) -> str:
    """The text a side of a pair shows, its marks taken away."""
    return html.unescape(re.sub(r"<[^>]+>", "", pieces_html))
