"""Every setting and option is checked when its config is made (config.py), in a user's words: the setting,
its option and the values it may take, one line and exit 2 before anything is judged or connected (with worker processes too:
tests/integration/test_cli.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from scrapy_zhdedup.cli.main import main
from scrapy_zhdedup.config import DedupConfig, EsConfig, PipelineConfig, from_settings
from scrapy_zhdedup.errors import ConfigError
from tests.support.helpers import write_jsonl

SHARE = "must be more than 0 and at most 1"

# each of these ran, judging with a rule nobody asked for (issue 39)
REFUSED = [
    (["--similarity", "1.5"], f"ZHDEDUP_SIMILARITY (--similarity) {SHARE}, not 1.5"),
    (["--similarity", "-1"], f"ZHDEDUP_SIMILARITY (--similarity) {SHARE}, not -1"),
    (["--similarity", "0"], f"ZHDEDUP_SIMILARITY (--similarity) {SHARE}, not 0"),
    (["--containment", "2"], f"ZHDEDUP_CONTAINMENT (--containment) {SHARE}, not 2"),
    (["--passage-share", "5"], f"ZHDEDUP_PASSAGE_SHARE (--passage-share) {SHARE}, not 5"),
    (["--max-chars", "0"], "ZHDEDUP_MAX_CHARS (--max-chars) must be at least 1, not 0"),
    (["--short-text-chars", "-5"], "ZHDEDUP_SHORT_TEXT_CHARS (--short-text-chars) must be at least 0, not -5"),
    (["--shingle-size", "0"], "ZHDEDUP_SHINGLE_SIZE (--shingle-size) must be at least 1, not 0"),
    (["--bloom-error-rate", "1"], "ZHDEDUP_BLOOM_ERROR_RATE (--bloom-error-rate) must be more than 0 and less than 1, "
                                  "not 1"),
    (["--threshold", "3", "--bands", "3"], "ZHDEDUP_BANDS (--bands) must be more than the threshold, "
                                           "ZHDEDUP_THRESHOLD (--threshold) 3, or 0 for threshold + 2; not 3"),
    (["--bands", "11"], "ZHDEDUP_THRESHOLD (--threshold) 3 with ZHDEDUP_BANDS (--bands) 11 needs 165 band tables, "
                        "more than 128: at this threshold ZHDEDUP_BANDS (--bands) may be 4 to 10"),
]


@pytest.mark.parametrize(("options", "error"), REFUSED, ids=[" ".join(o) for o, _ in REFUSED])
def test_an_option_out_of_range_is_one_line_naming_it_and_its_range(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], options: list[str], error: str) -> None:
    source = write_jsonl(tmp_path / "in.jsonl", [{"id": "a", "text": "国家统计局今天发布数据。" * 5}])
    assert main(["scan", str(source), "--workers", "1", *options]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.splitlines() == [f"zhdedup: error: {error}"]


def test_settings_are_checked_as_the_options_are() -> None:
    with pytest.raises(ConfigError) as refused:
        from_settings(DedupConfig, {"ZHDEDUP_SIMILARITY": "1.5"})  # scrapy crawl -s ZHDEDUP_SIMILARITY=1.5
    assert str(refused.value) == f"ZHDEDUP_SIMILARITY (--similarity) {SHARE}, not 1.5"
    with pytest.raises(ConfigError) as refused:  # was: ZHDEDUP_MODE='annotated' is not a valid Literal
        from_settings(PipelineConfig, {"ZHDEDUP_MODE": "annotated"})
    assert str(refused.value) == "ZHDEDUP_MODE must be 'drop' or 'annotate', not 'annotated'"
    with pytest.raises(ConfigError, match="ZHDEDUP_WORKERS must be at least 1, not 0"):
        from_settings(PipelineConfig, {"ZHDEDUP_WORKERS": 0})
    with pytest.raises(ConfigError, match="ZHDEDUP_FEATURES \\(--features\\) must be 'sketch', 'auto', 'words' or 'chars'"):
        DedupConfig(features="word")  # type: ignore[arg-type]


@pytest.mark.parametrize(("setting", "value", "error"), [
    ("ZHDEDUP_ES_BULK_SIZE", 0, "ZHDEDUP_ES_BULK_SIZE (--bulk-size) must be at least 1, not 0"),
    ("ZHDEDUP_ES_FLUSH_INTERVAL", 0, "ZHDEDUP_ES_FLUSH_INTERVAL (--flush-interval) must be more than 0, not 0"),
    ("ZHDEDUP_ES_BATCH_WINDOW", -1, "ZHDEDUP_ES_BATCH_WINDOW (--batch-window) must be at least 0, not -1"),
    ("ZHDEDUP_ES_MAX_RETRIES", -1, "ZHDEDUP_ES_MAX_RETRIES (--max-retries) must be at least 0, not -1"),
    ("ZHDEDUP_ES_TIMEOUT", 0, "ZHDEDUP_ES_TIMEOUT (--timeout) must be more than 0, not 0"),
    ("ZHDEDUP_ES_ANALYSIS", "hanlp", "ZHDEDUP_ES_ANALYSIS (--analysis) must be 'jieba', 'smartcn' or 'ik', not 'hanlp'"),
    ("ZHDEDUP_ES_PASSWORD", "x", "ZHDEDUP_ES_PASSWORD is set but ZHDEDUP_ES_USER is empty"),
])
def test_elasticsearch_settings_have_one_home(setting: str, value: object, error: str) -> None:
    """Checked in EsConfig alone (they were checked in the backend, the CLI and the client too)."""
    with pytest.raises(ConfigError) as refused:
        from_settings(EsConfig, {setting: value})
    assert str(refused.value) == error


def test_es_options_are_refused_before_a_node_is_asked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("elasticsearch")
    source = write_jsonl(tmp_path / "in.jsonl", [{"id": "a", "text": "国家统计局今天发布数据。"}])
    unreachable = "http://127.0.0.1:9"  # nothing listens: a node asked would fail differently
    assert main(["es", "ingest", str(source), "--url", unreachable, "--bulk-size", "0"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "zhdedup: error: ZHDEDUP_ES_BULK_SIZE (--bulk-size) must be at least 1, not 0"]
    assert main(["es", "status", "--url", unreachable, "--timeout", "0"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "zhdedup: error: ZHDEDUP_ES_TIMEOUT (--timeout) must be more than 0, not 0"]

