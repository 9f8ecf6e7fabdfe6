"""``zhdedup report`` / ``zhdedup es report``: one self-contained HTML file of what was folded and why,
from scan's verdicts or an embedded store with a crawl's items (of an Elasticsearch index: tests/es/test_report.py;
the page in a real browser: tests/integration/test_report.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from scrapy_zhdedup import DedupConfig, Deduper
from scrapy_zhdedup.cli.main import main
from scrapy_zhdedup.report.page import MAX_CHAR_DIFF, diff
from scrapy_zhdedup.text.clean import TextCleaner
from tests.support.helpers import write_jsonl
from tests.support.reports import TRICKY, clusters_of, corpus, member, scanned, text_of
from tests.support.zhtexts import traditional

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


def test_the_difference_compares_what_the_engine_compares_and_shows_what_was_written() -> None:
    """A copy in traditional characters, full-width punctuation or "…" is the same text to the engine: shown
    shared, each side in its own characters; what differs in the compared form is still marked."""
    normalise = TextCleaner().normalise
    original = "国家统计局今天发布数据，十月份居民消费价格上涨。这是第二句话…"
    repeat = traditional(original).replace("，", ",").replace("…", "...")
    assert repeat != original
    assert diff(original, repeat, normalise) == ([("same", original)], [("same", repeat)])
    left, right = diff(original, traditional("来源：新华网\n") + repeat.replace("第二", "第三"), normalise)
    assert "".join(t for _, t in left) == original
    assert ("new", traditional("来源：新华网\n")) in right and ("new", "三") in right and ("gone", "二") in left
    assert diff(original, repeat) != ([("same", original)], [("same", repeat)])  # compared as given: differs


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
    assert page.count('<mark class="shared">') >= 4 and re.search(r"<ins>[^<]*来源：金桥财经网\n</ins>", page)  # as written
    assert re.search(r"<del>.</del>", page) and re.search(r"<ins>冇</ins>", page)  # an edited character
    assert "· same text (content hash)" in page
    assert re.search(r"· (similar|contained: \d+% of it inside), similarity [01]\.\d\d", page)
    assert "(SimHash distance " in page and "it decides nothing" in page
    assert TRICKY not in page and "x/&lt;script&gt;alert(&quot;id&quot;)&lt;/script&gt;" in page
    assert '<td class="n" data-total="judged">11</td>' in page
    copy = member(page, "b/1-traditional")  # an exact copy in traditional characters, shown as it was written
    assert copy["status"] == "exact" and copy["why"] == "same text (content hash)"
    assert "<ins>" not in copy["repeat"] and "<del>" not in copy["original"]
    assert text_of(copy["repeat"]) == traditional(text_of(copy["original"])) != text_of(copy["original"])


def test_a_report_of_a_crawls_store_takes_the_texts_from_its_exported_items(tmp_path: Path,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """The store keeps ids and verdicts; the texts come from the feed (a JSON array, as ``-O items.json``
    writes it).  A drop-mode feed lacks the dropped repeats: they are listed, their text missing, said so."""
    records = corpus()
    deduper = Deduper.open(DedupConfig(), tmp_path / "store")
    verdicts = [deduper.judge(r["id"], text=r.get("text"), html=r.get("html")) for r in records]
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
