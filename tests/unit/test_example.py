"""The example's settings file and its report against the manifest (the crawl end to end:
tests/integration/test_example.py, tests/es/test_example.py)."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
from types import ModuleType

import pytest

from examples.run_example import build_report, format_report
from scrapy_zhdedup.config import PREFIX, DedupConfig, EsConfig, PipelineConfig
from tests.support import ROOT

SETTINGS = ROOT / "examples" / "zhnews" / "zhnews" / "settings.py"


def load_settings(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    for name in list(os.environ):
        if name.startswith(PREFIX):
            monkeypatch.delenv(name)
    spec = importlib.util.spec_from_file_location("zhnews_settings_under_test", SETTINGS)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_settings_list_every_option_at_its_default(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = load_settings(monkeypatch)
    assert settings.ZHDEDUP_ENABLED is True
    for cls in (PipelineConfig, DedupConfig, EsConfig):
        defaults = cls()
        for f in dataclasses.fields(cls):
            name = PREFIX + f.name.upper()
            assert hasattr(settings, name), f"examples/zhnews settings.py does not list {name}"
            expected = {"ZHDEDUP_MODE": "annotate",  # the example reports clusters, with what decided them
                        "ZHDEDUP_FIELDS": {**PipelineConfig().fields, "similarity": "dup_similarity"}}.get(
                            name, getattr(defaults, f.name))
            assert getattr(settings, name) == expected, name


def test_settings_follow_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    load_settings(monkeypatch)
    monkeypatch.setenv("ZHDEDUP_BACKEND", "elasticsearch")
    monkeypatch.setenv("ZHDEDUP_ES_URL", "http://127.0.0.1:9999")
    spec = importlib.util.spec_from_file_location("zhnews_settings_env", SETTINGS)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.ZHDEDUP_BACKEND == "elasticsearch"
    assert module.ZHDEDUP_ES_URL == "http://127.0.0.1:9999"


def test_report_judges_against_the_manifest() -> None:
    manifest = {"pages": {
        "a/news/001.html": {"base": "A", "transform": "original", "dup_of": None, "title": "a"},
        "b/news/001.html": {"base": "A", "transform": "copy", "dup_of": "a/news/001.html", "title": "a"},
        "a/news/002.html": {"base": "B", "transform": "original", "dup_of": None, "title": "b"},
        "b/news/002.html": {"base": "B", "transform": "edit_chars", "dup_of": "a/news/002.html", "title": "b"},
        "a/news/003.html": {"base": "C", "transform": "original", "dup_of": None, "title": "c"},
    }}

    def item(path: str, status: str = "unique", dup_of: str | None = None) -> dict:
        url = f"http://127.0.0.1:1/{path}"
        dup_url = f"http://127.0.0.1:1/{dup_of}" if dup_of else None
        return {"url": url, "dedup_status": status, "dup_of": dup_url, "dup_distance": 0 if dup_of else None,
                "cluster_id": dup_url or url}

    items = [item("b/news/001.html"), item("a/news/001.html", "exact", "b/news/001.html"),  # order-free
             item("a/news/002.html"), item("b/news/002.html"),  # missed
             item("a/news/003.html", "near", "a/news/002.html")]  # wrongly merged
    report = build_report(items, manifest)
    assert (report.seen, report.expected_duplicates, report.correct) == (5, 2, 1)
    assert report.missed == ["b/news/002.html"]
    assert report.wrongly_merged == [{"page": "a/news/003.html", "dup_of": "a/news/002.html"}]
    assert not report.ok
    said = format_report(report, manifest)  # "(original)" beside a repeat is what the demo made the page, said so
    assert "in brackets, what this demo's site generator did" in said and "(original)" in said
