"""The example crawl end to end on the embedded store (examples/run_example.py, as a program)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from scrapy_zhdedup.config import PREFIX
from tests.support import ROOT
from tests.support.example import ARTICLE_PAGES, EXPECTED_REPEATS, run_example


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


def test_the_demo_leaves_no_directory_behind(tmp_path: Path) -> None:
    """Issue 33, item 9: each demo run left a /tmp/zhdedup-example-* directory."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(PREFIX)} | {"TMPDIR": str(tmp_path)}
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / "run_example.py")], capture_output=True,
                          text=True, env=env, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "removed at exit (--work-dir DIR keeps them)" in proc.stdout and "similarity 0." in proc.stdout
    assert list(tmp_path.iterdir()) == []
