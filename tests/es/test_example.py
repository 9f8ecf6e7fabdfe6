"""The example crawl end to end on Elasticsearch (examples/run_example.py, as a program)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.example import ARTICLE_PAGES, EXPECTED_REPEATS, run_example


@pytest.mark.es
def test_example_crawl_on_elasticsearch(tmp_path: Path, es_url: str, es_client, index: str) -> None:
    report = run_example(tmp_path, "--backend", "elasticsearch", "--es-url", es_url, "--es-index", index)
    assert report["backend"] == "elasticsearch"
    assert report["seen"] == ARTICLE_PAGES
    assert report["not_crawled"] == []
    assert report["statuses"].get("unjudged", 0) == 0
    assert report["expected_duplicates"] == EXPECTED_REPEATS
    assert report["wrongly_merged"] == []
    assert report["missed"] == []  # the passage lookup runs on Elasticsearch too
    assert es_client.count(index=index)["count"] == ARTICLE_PAGES  # annotate mode stores every page
