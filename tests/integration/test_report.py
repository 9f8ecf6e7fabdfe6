"""The report in a real browser (headless Chromium, Debian's ``chromium``, installed by scripts/chromium.sh):
its DOM once its script has run, and a screenshot at ``SHOT``."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from scrapy_zhdedup.cli.main import main
from tests.support import ROOT
from tests.support.reports import clusters_of, scanned

SHOT = ROOT / ".cache" / "report-test" / "report.png"  # the browser test's screenshot, kept for a look


def browser() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if found is None:
        pytest.skip("no headless Chromium: scripts/chromium.sh (run by scripts/test.sh and so by .ci/run) installs "
                    "Debian's chromium as root")
    return found


def chromium(page: Path, profile: Path, *args: str, fragment: str = "") -> str:
    """Chromium run headless on ``page`` (a file:// URL, as a double click opens it); what it printed."""
    cmd = [browser(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", f"--user-data-dir={profile}",
           "--virtual-time-budget=5000", *args, page.resolve().as_uri() + fragment]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_the_report_in_a_real_browser(tmp_path: Path) -> None:
    """The DOM after the page's script ran: the clusters and the highlighted spans are there, the filters
    (opened from the URL's fragment, as a shared link would) hide what they should; and a screenshot."""
    browser()
    source, verdicts = scanned(tmp_path)
    SHOT.parent.mkdir(parents=True, exist_ok=True)
    out = SHOT.with_suffix(".html")
    assert main(["report", str(verdicts), "--input", str(source), "-o", str(out)]) == 0
    dom = chromium(out, tmp_path / "profile", "--dump-dom")
    assert clusters_of(dom) == [4, 2, 2] and 'data-shown="3"' in dom  # the script ran over every cluster
    assert len(re.findall(r"<mark class=\"shared\">", dom)) >= 4 and "<ins>" in dom
    filtered = chromium(out, tmp_path / "profile", "--dump-dom", fragment="#status=near&min=3")
    hidden = re.findall(r'<section class="cluster" id="c\d+" data-size="(\d+)" hidden', filtered)
    assert hidden == ["2", "2"] and 'data-shown="1"' in filtered
    assert len(re.findall(r'<details class="member" data-status="exact"[^>]* hidden', filtered)) == 2  # every one
    SHOT.unlink(missing_ok=True)
    chromium(out, tmp_path / "profile", f"--screenshot={SHOT}", "--window-size=1400,1800", "--hide-scrollbars")
    assert SHOT.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and SHOT.stat().st_size > 20_000
    print(f"report {out}, screenshot {SHOT}", file=sys.stderr)
