"""The example crawl end to end (examples/run_example.py), and its settings file."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from examples.run_example import build_report
from scrapy_zhdedup.config import PREFIX, DedupConfig, EsConfig, PipelineConfig

ROOT = Path(__file__).resolve().parent.parent
SETTINGS = ROOT / "examples" / "zhnews" / "zhnews" / "settings.py"
ARTICLE_PAGES = 28  # examples/site/generate.py PLAN
EXPECTED_REPEATS = 11  # pages beyond the first of their article


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


def run_example(tmp_path: Path, *args: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(PREFIX)}
    out = tmp_path / "report.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "run_example.py"), "--work-dir", str(tmp_path / "run"),
         "--json", str(out), *args],
        capture_output=True, text=True, env=env, timeout=600, check=False,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    assert "against the manifest:" in proc.stdout
    return json.loads(out.read_text(encoding="utf-8"))


def test_example_crawl_on_the_embedded_store(tmp_path: Path) -> None:
    report = run_example(tmp_path)
    assert report["seen"] == ARTICLE_PAGES
    assert report["not_crawled"] == []
    assert report["statuses"].get("unjudged", 0) == 0
    assert report["expected_duplicates"] == EXPECTED_REPEATS
    assert report["wrongly_merged"] == []
    assert report["missed"] == []
    assert report["ok"] is True
    assert all(r["correct"] for c in report["clusters"] for r in c["repeats"])


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


def test_the_demo_leaves_no_directory_behind(tmp_path: Path) -> None:
    """Issue 33, item 9: each demo run left a /tmp/zhdedup-example-* directory."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(PREFIX)} | {"TMPDIR": str(tmp_path)}
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / "run_example.py")], capture_output=True,
                          text=True, env=env, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "removed at exit (--work-dir DIR keeps them)" in proc.stdout and "similarity 0." in proc.stdout
    assert list(tmp_path.iterdir()) == []
