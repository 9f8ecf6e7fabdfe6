"""The example crawl (examples/run_example.py) as the tests run it, and what its site holds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from scrapy_zhdedup.config import PREFIX
from tests.support import ROOT

ARTICLE_PAGES = 28  # examples/site/generate.py PLAN
EXPECTED_REPEATS = 11  # pages beyond the first of their article


def run_example(tmp_path: Path, *args: str) -> dict:
    """examples/run_example.py as a program, in ``tmp_path``, with ``args``: its JSON report."""
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
