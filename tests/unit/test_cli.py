"""``zhdedup scan`` on JSONL files, in-process through ``cli.main`` (as the installed console script:
tests/integration/test_cli.py)."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

import pytest

from scrapy_zhdedup import DedupConfig, Deduper
from scrapy_zhdedup.cli.main import build_parser, main
from tests.support import zhtexts
from tests.support.helpers import write_jsonl
from tests.support.scans import ARTICLES, BAD, bad_file, oracle, read_verdicts, scan_records
from tests.support.zhtexts import news_page

# --- the 20k-line run, started first so it overlaps the quick tests ---------------------------------




# --- scan ------------------------------------------------------------------------------------------


def test_scan_writes_one_line_per_input_in_input_order(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    records = scan_records()
    source = write_jsonl(tmp_path / "in.jsonl", records)
    assert main(["scan", "--workers", "1", str(source)]) == 0
    captured = capsys.readouterr()
    out = read_verdicts(captured.out)
    assert [o["id"] for o in out] == [str(r["id"]) for r in records]
    assert out == oracle(records)
    by_id = {o["id"]: o for o in out}
    assert by_id[ARTICLES[0].id] == {"id": ARTICLES[0].id, "status": "unique", "dup_of": None, "reason": None,
                                     "similarity": None, "contained": None, "distance": None}
    assert by_id["copy-0"] == {"id": "copy-0", "status": "exact", "dup_of": ARTICLES[0].id, "reason": "exact",
                               "similarity": 1.0, "contained": 1.0, "distance": 0}
    assert (by_id["typo-1"]["status"], by_id["typo-1"]["dup_of"]) == ("near", ARTICLES[1].id)
    assert by_id["typo-1"]["distance"] >= 0 and by_id["typo-1"]["similarity"] >= DedupConfig().similarity
    assert by_id["typo-1"]["reason"] == "similar"
    assert by_id["repost-2"]["dup_of"] == ARTICLES[2].id and by_id["repost-2"]["status"] == "near"
    assert by_id["trad-3"]["dup_of"] == ARTICLES[3].id
    assert by_id["9"]["status"] == "unique" and by_id["page-9"] == {
        "id": "page-9", "status": "exact", "dup_of": "9", "reason": "exact", "similarity": 1.0, "contained": 1.0,
        "distance": 0}
    assert by_id["copy-of-typo"] == {"id": "copy-of-typo", "status": "exact", "dup_of": "typo-1", "reason": "exact",
                                     "similarity": 1.0, "contained": 1.0, "distance": 0}
    assert f"zhdedup scan: {len(records)} judged" in captured.err
    assert "0 bad lines skipped" in captured.err


def test_output_file_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    records = scan_records()
    source = write_jsonl(tmp_path / "in.jsonl", records)
    assert main(["scan", "--workers", "1", str(source), "-o", str(tmp_path / "verdicts.jsonl")]) == 0
    assert capsys.readouterr().out == ""
    assert read_verdicts((tmp_path / "verdicts.jsonl").read_text(encoding="utf-8")) == oracle(records)


def test_bad_lines_are_reported_with_line_numbers_and_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    source = bad_file(tmp_path)
    with caplog.at_level(logging.WARNING):
        assert main(["scan", "--workers", "1", str(source)]) == 0
    captured = capsys.readouterr()
    assert [o["id"] for o in read_verdicts(captured.out)] == ["first", "last"]
    messages = [r.getMessage() for r in caplog.records]
    for number, _, reason in BAD:
        assert any(f"{source}:{number}: {reason}" in m for m in messages), (number, messages)
    assert len(messages) == len(BAD)
    assert f"{len(BAD)} bad lines skipped" in captured.err


@pytest.mark.parametrize(("bad_line", "number", "reason"), [(b[1], 2, b[2]) for b in (BAD[0], BAD[2], BAD[7])],
                         ids=["not-json", "no-id", "empty-text"])
def test_strict_stops_at_the_first_bad_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            bad_line: Any, number: int, reason: str) -> None:
    source = write_jsonl(tmp_path / "in.jsonl", [{"id": "a", "text": ARTICLES[0].text}, bad_line,
                                             {"id": "b", "text": ARTICLES[1].text}])
    assert main(["scan", "--workers", "1", str(source), "--strict"]) == 2
    captured = capsys.readouterr()
    assert f"zhdedup: error: {source}:{number}: {reason}" in captured.err
    assert [o["id"] for o in read_verdicts(captured.out)] == ["a"]


def test_store_persists_across_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "store"
    first = write_jsonl(tmp_path / "day1.jsonl", [{"id": a.id, "text": a.text} for a in ARTICLES[:6]])
    second = write_jsonl(tmp_path / "day2.jsonl", [
        {"id": "again-0", "text": ARTICLES[0].text},
        {"id": "typo-1", "text": zhtexts.edit_chars(ARTICLES[1].text, 1, seed=3)},
        {"id": ARTICLES[6].id, "text": ARTICLES[6].text},
    ])
    assert main(["scan", "--workers", "1", str(first), "--store", str(store)]) == 0
    assert {o["status"] for o in read_verdicts(capsys.readouterr().out)} == {"unique"}
    assert (store / "index.npz").exists() and (store / "store.json").exists()
    assert main(["scan", "--workers", "1", str(second), "--store", str(store)]) == 0
    out = read_verdicts(capsys.readouterr().out)
    assert out[0] == {"id": "again-0", "status": "exact", "dup_of": ARTICLES[0].id, "reason": "exact", "similarity": 1.0,
                      "contained": 1.0, "distance": 0}
    assert (out[1]["status"], out[1]["dup_of"]) == ("near", ARTICLES[1].id)
    assert out[2]["status"] == "unique"
    # without the store the second day knows nothing
    assert main(["scan", "--workers", "1", str(second)]) == 0
    assert {o["status"] for o in read_verdicts(capsys.readouterr().out)} == {"unique"}


def test_corrupt_store_is_an_error_naming_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "store"
    source = write_jsonl(tmp_path / "in.jsonl", [{"id": "a", "text": ARTICLES[0].text}])
    assert main(["scan", "--workers", "1", str(source), "--store", str(store)]) == 0
    (store / "index.npz").write_bytes(b"this is not an index")
    assert main(["scan", "--workers", "1", str(source), "--store", str(store)]) == 2
    err = capsys.readouterr().err
    assert f"zhdedup: error: {store / 'index.npz'}" in err and "Move or delete this file" in err


def test_dedup_options_reach_the_engine(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    article = ARTICLES[3]
    source = write_jsonl(tmp_path / "in.jsonl", [{"id": "s", "text": article.text},
                                            {"id": "t", "text": zhtexts.traditional(article.text)}])
    assert main(["scan", "--workers", "1", str(source)]) == 0
    assert read_verdicts(capsys.readouterr().out)[1]["dup_of"] == "s"
    assert main(["scan", "--workers", "1", str(source), "--no-t2s", "--threshold", "0", "--features", "chars"]) == 0
    assert read_verdicts(capsys.readouterr().out)[1]["status"] != "exact"


def test_missing_input_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scan", "--workers", "1", str(tmp_path / "nope.jsonl")]) == 2
    assert "zhdedup: error:" in capsys.readouterr().err


def test_bom_and_undecodable_bytes_in_the_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "in.jsonl"
    good = json.dumps({"id": "a", "text": ARTICLES[0].text}, ensure_ascii=False).encode("utf-8")
    broken = json.dumps({"id": "b", "text": ARTICLES[1].text}, ensure_ascii=False).encode("utf-8").replace(
        "。".encode(), b"\xff", 1)
    source.write_bytes(b"\xef\xbb\xbf" + good + b"\n" + broken + b"\n")
    assert main(["scan", "--workers", "1", str(source)]) == 0
    assert [o["status"] for o in read_verdicts(capsys.readouterr().out)] == ["unique", "unique"]


# --- the console script --------------------------------------------------------------------------






def test_es_commands_without_the_client_say_what_to_install(monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delitem(sys.modules, "es_plugin.commands.cli", raising=False)
    monkeypatch.setitem(sys.modules, "elasticsearch", None)  # as if the [es] extra were not installed
    assert main(["es", "status", "--url", "http://127.0.0.1:1"]) == 2
    assert "pip install 'scrapy-zhdedup[es]'" in capsys.readouterr().err


def test_a_programming_error_keeps_its_traceback(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Only errors raised on purpose (ZhDedupError, OSError) become one line; a bug is not hidden."""
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise ValueError("a bug")

    monkeypatch.setattr(Deduper, "judge_prepared", broken)
    with pytest.raises(ValueError, match="a bug"):
        main(["scan", "--workers", "1", str(write_jsonl(tmp_path / "in.jsonl", [{"id": "a", "text": "一段文字"}]))])


# --- issue 33: a new user's edges ------------------------------------------------------------------




def test_not_json_says_where_and_an_output_directory_is_not_created(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text('{"id": "x", "text": "一段\t文字"}\n', encoding="utf-8")  # a raw tab inside a string
    assert main(["scan", "--workers", "1", str(source)]) == 1
    assert "not JSON (Invalid control character at column 24)" in capsys.readouterr().err
    good = write_jsonl(tmp_path / "good.jsonl", [{"id": "a", "text": ARTICLES[0].text}])
    out = tmp_path / "no" / "such" / "out.jsonl"
    assert main(["scan", "--workers", "1", str(good), "-o", str(out)]) == 2
    assert f"{out}: no such directory {out.parent}" in capsys.readouterr().err
    assert not (tmp_path / "no").exists()


def test_verbose_after_the_subcommand_and_a_directory_of_pages(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """``-v`` is taken after a subcommand too; ``scan`` reads a directory of saved pages as ``es ingest``
    does (its path below the directory as id)."""
    site = tmp_path / "site"
    (site / "b").mkdir(parents=True)
    (site / "a.html").write_text(news_page(ARTICLES[0].title, ARTICLES[0].text), encoding="utf-8")
    (site / "b" / "copy.htm").write_bytes(news_page(ARTICLES[0].title, ARTICLES[0].text, site="caijing",
                                                    charset="gbk").encode("gbk"))
    (site / "notes.txt").write_text("not a page", encoding="utf-8")
    assert main(["scan", str(site), "--workers", "1", "-v"]) == 0
    assert read_verdicts(capsys.readouterr().out) == [
        {"id": "a.html", "status": "unique", "dup_of": None, "reason": None, "similarity": None, "contained": None,
         "distance": None},
        {"id": "b/copy.htm", "status": "exact", "dup_of": "a.html", "reason": "exact", "similarity": 1.0,
         "contained": 1.0, "distance": 0}]
    assert build_parser().parse_args(["es", "status", "-v"]).verbose
    assert not build_parser().parse_args(["es", "status"]).verbose
