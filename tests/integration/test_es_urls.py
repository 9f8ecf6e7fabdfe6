"""A crawl whose ``ZHDEDUP_ES_URL`` the client cannot use stops at start in one line (the URL checks
themselves: tests/unit/test_es_urls.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support import SUPPORT


def test_a_crawl_with_a_malformed_url_stops_at_start_with_one_clear_line(tmp_path: Path) -> None:
    urls = tmp_path / "urls.txt"
    urls.write_text("http://127.0.0.1:9/a.html\n", encoding="utf-8")
    spider = SUPPORT / "fault_spider.py"
    proc = subprocess.run([sys.executable, "-m", "scrapy", "runspider", str(spider), "-a", f"urls={urls}",
                           "-a", f"out={tmp_path / 'out.json'}", "-s", "ZHDEDUP_BACKEND=elasticsearch",
                           "-s", "ZHDEDUP_ES_URL=127.0.0.1:9281"], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path, check=False)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0  # a crawl that cannot start closes itself (README): it does not raise
    errors = [line for line in log.splitlines() if " ERROR: " in line]
    assert len(errors) == 1 and errors[0].endswith(
        "ERROR: zhdedup: cannot start, the crawl stops: ZHDEDUP_ES_URL (--url): '127.0.0.1:9281' is not a node "
        "URL: it has no scheme; write http://127.0.0.1:9281 (https:// with TLS)"), log[-3000:]
    assert "Could not parse URL" not in log and "Traceback" not in log
    assert "Spider closed (zhdedup_cannot_start)" in log and "downloader/request_count" not in log
