"""``zhdedup report`` / ``zhdedup es report``: one self-contained HTML file of what was folded and why,
from scan's verdicts or an embedded store with a crawl's items (of an Elasticsearch index: tests/es/test_report.py;
the page in a real browser: tests/integration/test_report.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from scrapy_zhdedup import DedupConfig, Deduper
from scrapy_zhdedup.cli.main import main
from scrapy_zhdedup.report.page import MAX_CHAR_DIFF, diff
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
    source = write_jsonl(tmp_path / "corpus.jsonl", corpus())
    verdicts = tmp_path / "verdicts.jsonl"
    assert main(["scan", str(source), "-o", str(verdicts), "--workers", "1"]) == 0
    return source, verdicts


def clusters_of(page: str) -> list[int]:
    return [int(n) for n in re.findall(r'<section class="cluster" id="c\d+" data-size="(\d+)"', page)]


# --- the difference of two texts ---------------------------------------------------------------------


def test_the_difference_rebuilds_both_texts_and_marks_what_changed() -> None:
    original = "第一句话在这里。第二句话说了别的事情！\n第三句。"
    repeat = "来源：新华网\n第一句话在这里。第二句话说了另外的事情！\n第三句。"
    left, right = diff(original, repeat)
    assert "".join(t for _, t in left) == original and "".join(t for _, t in right) == repeat
    assert ("new", "来源：新华网\n") in right and ("new", "另外") in right and ("gone", "别") in left
    assert [t for k, t in right if k == "same"][-1] == "的事情！\n第三句。"


def test_a_long_changed_run_is_marked_whole_not_compared_character_by_character() -> None:
    """The character-level pass is bounded: difflib's cost grows with the square of the length."""
    a, b = "甲" * (MAX_CHAR_DIFF + 1), "乙" * 10
    assert diff(a, b) == ([("gone", a)], [("new", b)])
    assert diff("甲" * MAX_CHAR_DIFF, "甲" * (MAX_CHAR_DIFF - 1) + "乙")[1] == [("same", "甲" * (MAX_CHAR_DIFF - 1)),
                                                                             ("new", "乙")]


# --- the sources ---------------------------------------------------------------------------------------


def test_a_report_of_a_scan_shows_each_cluster_largest_first_with_what_decided(tmp_path: Path,
                                                                               capsys: pytest.CaptureFixture[str]) -> None:
    source, verdicts = scanned(tmp_path)
    out = tmp_path / "report.html"
    assert main(["report", str(verdicts), "--input", str(source), "-o", str(out)]) == 0
    assert f"-> {out.resolve().as_uri()}" in capsys.readouterr().err
    page = out.read_text(encoding="utf-8")
    assert clusters_of(page) == [4, 2, 2]  # a/0 and its three repeats first
    assert '<meta charset="utf-8">' in page and '<html lang="zh-CN">' in page and "Noto Sans CJK SC" in page
    assert not re.search(r'(src|href)="(https?:)?//', page)  # nothing fetched: opens offline, with a double click
    assert page.count('<mark class="shared">') >= 4 and re.search(r"<ins>[^<]*来源:金桥财经网\n</ins>", page)
    assert re.search(r"<del>.</del>", page) and re.search(r"<ins>冇</ins>", page)  # an edited character
    assert "· same text (content hash)" in page
    assert re.search(r"· (similar|contained: \d+% of it inside), similarity [01]\.\d\d", page)
    assert "(SimHash distance " in page and "it decides nothing" in page
    assert TRICKY not in page and "x/&lt;script&gt;alert(&quot;id&quot;)&lt;/script&gt;" in page
    assert '<td class="n" data-total="judged">11</td>' in page


def test_a_report_of_a_crawls_store_takes_the_texts_from_its_exported_items(tmp_path: Path,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """The store keeps ids and verdicts; the texts come from the feed (a JSON array, as ``-O items.json``
    writes it).  A drop-mode feed lacks the dropped repeats: they are listed, their text missing, said so."""
    records = corpus()
    deduper = Deduper.open(DedupConfig(), tmp_path / "store")
    verdicts = [deduper.check(r["id"], text=r.get("text"), html=r.get("html")) for r in records]
    deduper.close()
    delivered = [{"url": r["id"], "title": "…", **({"text": r["text"]} if "text" in r else {"html": r["html"]})}
                 for r, v in zip(records, verdicts) if v.status == "unique"]
    (tmp_path / "items.json").write_text(json.dumps(delivered, ensure_ascii=False), encoding="utf-8")
    out = tmp_path / "report.html"
    assert main(["report", "--store", str(tmp_path / "store"), "--input", str(tmp_path / "items.json"),
                 "-o", str(out)]) == 0
    page = out.read_text(encoding="utf-8")
    assert clusters_of(page) == [4, 2, 2]
    assert "5 documents shown have no text in" in page and "ZHDEDUP_MODE = &quot;annotate&quot;" in page
    assert main(["report", "--store", str(tmp_path / "store"), "-o", str(out)]) == 0  # no texts at all: verdicts
    assert clusters_of(out.read_text(encoding="utf-8")) == [4, 2, 2]
    capsys.readouterr()


def test_report_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source, verdicts = scanned(tmp_path)
    capsys.readouterr()
    for argv, said in [(["report"], "give zhdedup scan's verdicts"),
                       (["report", str(verdicts)], "--input is required"),
                       (["report", str(verdicts), "--input", str(source), "--max-clusters", "0"], "at least 1"),
                       (["report", "--store", str(tmp_path)], "not a scrapy-zhdedup store"),
                       (["report", str(source), "--input", str(source), "-o", str(tmp_path / "no" / "r.html")],
                        "no such directory")]:
        assert main(argv) == 2, argv
        assert said in capsys.readouterr().err, argv


def test_a_report_whose_input_has_none_of_the_ids_says_so_and_fails(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """The wrong --input (another corpus, a directory of pages, a feed read by the wrong --id-field) is an
    error naming it, not a report of clusters without texts and advice about drop-mode crawls."""
    source, verdicts = scanned(tmp_path)
    pages = tmp_path / "site"
    pages.mkdir()
    (pages / "index.html").write_text("<html><body><p>首页</p></body></html>", encoding="utf-8")
    other = write_jsonl(tmp_path / "other.jsonl", [{"id": "z", "text": "另一个语料"}])
    out = tmp_path / "report.html"
    capsys.readouterr()
    for wrong in (pages, other):
        assert main(["report", str(verdicts), "--input", str(wrong), "-o", str(out)]) == 2
        err = capsys.readouterr().err
        assert f"{wrong}: no record has the 'id' of a judged document: give the scan's input" in err, err
        assert "drop-mode" not in err and not out.exists()
    assert main(["report", str(verdicts), "--input", str(source), "--id-field", "url", "-o", str(out)]) == 2
    assert "no record has the 'url'" in capsys.readouterr().err
