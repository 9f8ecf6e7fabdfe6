"""``zhdedup`` behaves like a Unix tool: version, help for every option, one index convention (quiet closed
pipes: tests/integration/test_cli_unix.py)."""

from __future__ import annotations

import argparse
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from es_plugin.commands.checkpoint import Checkpoint
from scrapy_zhdedup import __version__
from scrapy_zhdedup.cli.main import build_parser, main
from tests.support.helpers import write_jsonl
from tests.support.zhtexts import articles


def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def es_commands() -> dict[str, argparse.ArgumentParser]:
    return subparsers(subparsers(build_parser())["es"])


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0 and capsys.readouterr().out == f"zhdedup {__version__}\n"


def test_every_option_has_help_and_the_top_help_no_markup(capsys: pytest.CaptureFixture[str]) -> None:
    top = subparsers(build_parser())
    commands = {"scan": top["scan"], "report": top["report"], **{f"es {k}": v for k, v in es_commands().items()}}
    for name, parser in commands.items():
        for action in parser._actions:
            assert action.help and action.help.strip(), f"zhdedup {name} {'/'.join(action.option_strings) or action.dest}"
        parser.format_help()  # every help text formats (a bare % in one used to break --help)
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "``" not in out and "exit codes:" in out


def test_the_top_help_names_every_es_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    listed = " ".join(capsys.readouterr().out.split("    es ")[1].split("\n\n")[0].split())
    assert listed == f"Elasticsearch: {', '.join(es_commands())}"
    assert {"replay", "report"} <= set(es_commands())


def test_every_es_command_names_its_index_with_the_same_option() -> None:
    for name, parser in es_commands().items():
        index = [a for a in parser._actions if a.dest == "es_index"]
        assert len(index) == 1 and index[0].option_strings == ["--index"], name
        assert index[0].default == os.environ.get("ZHDEDUP_ES_INDEX", "zhdedup-docs"), name
        positional = [a.dest for a in parser._actions if not a.option_strings]
        assert positional in ([], ["inputs"], ["query"], ["dead_letter"]), (name, positional)


@pytest.mark.parametrize(("command", "absent"), [
    ("search", ("threshold", "features", "passage_share", "es_bulk_size")),
    ("status", ("features", "shingle_size", "passage_share", "es_bulk_size", "es_text_field")),
    ("install", ("features", "passage_chars", "es_bulk_size")),
    ("reconcile", ("features", "shingle_size", "es_text_field")),
    ("dedup-index", ("es_analysis", "es_bulk_size")),
])
def test_options_only_where_they_act(command: str, absent: tuple[str, ...]) -> None:
    dests = {a.dest for a in es_commands()[command]._actions}
    assert not dests & set(absent), dests & set(absent)


@pytest.fixture(params=[0o022, 0o027])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


def test_outputs_get_their_mode_from_the_umask_as_every_unix_tool(umask: int, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """Written through a temporary file and renamed (atomic), yet created as open(2) creates files: 0644
    under umask 022, where mkstemp made every one 0600 and a report for colleagues unreadable to them."""
    source = write_jsonl(tmp_path / "corpus.jsonl", [{"id": str(i), "text": a.text}
                                                     for i, a in enumerate(articles(3) * 2)])
    assert main(["scan", str(source), "-o", str(tmp_path / "verdicts.jsonl"), "--store", str(tmp_path / "store"),
                 "--workers", "1"]) == 0
    assert main(["report", str(tmp_path / "verdicts.jsonl"), "--input", str(source),
                 "-o", str(tmp_path / "report.html")]) == 0
    Checkpoint(tmp_path / "checkpoint.json", {"run": 1}, {"line": 3}).save()
    written = [tmp_path / "verdicts.jsonl", tmp_path / "report.html", tmp_path / "store" / "index.npz",
               tmp_path / "store" / "store.json", tmp_path / "checkpoint.json"]
    assert {p.name: oct(stat.S_IMODE(p.stat().st_mode)) for p in written} == \
        {p.name: oct(0o666 & ~umask) for p in written}
    assert not list(tmp_path.rglob("*.tmp"))
    capsys.readouterr()
