"""The corpus the ``zhdedup scan`` tests judge (in-process and as the installed program), its bad lines,
and the verdicts to expect."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from scrapy_zhdedup import Deduper
from tests.support import zhtexts
from tests.support.helpers import write_jsonl
from tests.support.zhtexts import news_page

ARTICLES = zhtexts.articles(12)


def read_verdicts(text: str) -> list[dict[str, Any]]:
    """The verdict lines of a scan's output."""
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def scan_records() -> list[dict[str, Any]]:
    """Originals, an exact copy in full width, a typo, a repost, a traditional copy, pages, a numeric id."""
    a = ARTICLES
    return [
        *({"id": x.id, "text": x.text} for x in a[:8]),
        {"id": "copy-0", "text": zhtexts.full_width(a[0].text)},
        {"id": "typo-1", "text": zhtexts.edit_chars(a[1].text, 1, seed=1)},
        {"id": "repost-2", "text": zhtexts.with_attribution(a[2].text)},
        {"id": "trad-3", "text": zhtexts.traditional(a[3].text)},
        {"id": 9, "html": news_page(a[9].title, a[9].text)},  # numeric id, html instead of text
        {"id": "page-9", "html": news_page(a[9].title, a[9].text, site="caijing")},
        {"id": "copy-of-typo", "text": zhtexts.edit_chars(a[1].text, 1, seed=1)},
    ]


def oracle(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The verdicts of ``records`` judged one by one in this process."""
    deduper = Deduper()
    return [deduper.judge(str(r["id"]), text=r.get("text"), html=r.get("html")).record() for r in records]


BAD = [
    (2, "not json at all", "not JSON"),
    (3, "[1, 2, 3]", "not a JSON object"),
    (4, {"text": ARTICLES[1].text}, 'no usable "id"'),
    (5, {"id": "", "text": ARTICLES[1].text}, 'no usable "id"'),
    (6, {"id": {"nested": 1}, "text": ARTICLES[1].text}, 'no usable "id"'),
    (7, {"id": "no-text"}, 'no "text" or "html" string'),
    (8, {"id": "number-text", "text": 12345}, 'no "text" or "html" string'),
    (9, {"id": "empty", "text": ""}, "no text to judge"),
    (10, {"id": "spaces", "text": " \u3000\n "}, "no text to judge"),
    (11, {"id": "markup", "html": "<html><script>var x = 1;</script></html>"}, "no text to judge"),
    (12, '{"id": "truncated", "text": "国家统计局', "not JSON"),
]


def bad_file(tmp_path: Path) -> Path:
    """A JSONL file of every line in BAD, between two good ones."""
    lines: list[Any] = [{"id": "first", "text": ARTICLES[0].text}]
    lines += [line for _, line, _ in BAD]
    lines += ["", {"id": "last", "text": ARTICLES[1].text}]  # a blank line is not a record
    return write_jsonl(tmp_path / "bad.jsonl", lines)
