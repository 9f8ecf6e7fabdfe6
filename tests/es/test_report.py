"""``zhdedup es report``: the report of an Elasticsearch index (a real node)."""

from __future__ import annotations

from pathlib import Path

import pytest
from elasticsearch import Elasticsearch

from scrapy_zhdedup.cli.main import main
from tests.support.helpers import write_jsonl
from tests.support.reports import clusters_of, corpus, member, text_of
from tests.support.zhtexts import traditional


@pytest.mark.es
def test_a_report_of_an_index_reads_verdicts_and_texts_there(es_url: str, es_client: Elasticsearch, index: str,
                                                             tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = write_jsonl(tmp_path / "corpus.jsonl", corpus())
    conn = ["--url", es_url, "--index", index]
    assert main(["es", "ingest", str(source), *conn, "--checkpoint-dir", str(tmp_path / "ck"), "--text-field",
                 "content", "--dead-letter", str(tmp_path / "dead.jsonl")]) == 0
    out = tmp_path / "report.html"
    assert main(["es", "report", *conn, "--text-field", "content", "-o", str(out)]) == 0
    page = out.read_text(encoding="utf-8")
    assert clusters_of(page) == [4, 2, 2] and page.count('<mark class="shared">') >= 4
    assert "No text" not in page
    copy = member(page, "b/1-traditional")  # the engine compares simplified characters: the same text
    assert copy["status"] == "exact" and copy["why"] == "same text (content hash)"
    assert "<ins>" not in copy["repeat"] and "<del>" not in copy["original"]
    assert text_of(copy["repeat"]) == traditional(text_of(copy["original"])) != text_of(copy["original"])
    assert main(["es", "report", "--url", es_url, "--index", f"{index}-missing", "-o", str(out)]) == 2
    assert "no such index" in capsys.readouterr().err
