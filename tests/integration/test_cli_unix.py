"""``zhdedup`` as a Unix tool, run as a program: a closed pipe ends quietly, ``-o`` may name a pipe, warnings
are said as errors are."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from scrapy_zhdedup.cli.main import main
from tests.support.zhtexts import articles


def test_a_closed_pipe_ends_quietly() -> None:
    """As `zhdedup es search … | head` does once head has read its lines: no traceback, no error line."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # nobody will read: the first write fails with EPIPE
    try:
        proc = subprocess.run([sys.executable, "-m", "scrapy_zhdedup.cli", "es", "search", "台风 登陆", "--print-body"],
                              stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=120, check=False)
    finally:
        os.close(write_end)
    assert proc.returncode == 1 and proc.stderr == ""


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
def test_scan_to_a_named_pipe_writes_into_it_and_keeps_it(tmp_path: Path) -> None:
    """``-o`` naming a device or pipe (``-o /dev/null``) writes into it: renaming a finished temporary
    file over it replaced /dev/null with a regular file when run as root."""
    source, fifo = tmp_path / "in.jsonl", tmp_path / "out.fifo"
    source.write_text('{"id": "a", "text": "这是一篇用来测试输出管道的中文新闻稿件。"}\n', encoding="utf-8")
    os.mkfifo(fifo)
    received: list[str] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_text(encoding="utf-8")), daemon=True)
    reader.start()
    assert main(["scan", str(source), "-o", str(fifo)]) == 0
    reader.join(timeout=30)
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert '"a"' in received[0] and '"unique"' in received[0]
    assert not list(tmp_path.glob(".out.fifo.*"))


def test_warnings_are_said_as_the_errors_are_and_pages_are_not_lines(tmp_path: Path) -> None:
    """``zhdedup: warning: …`` like argparse's ``zhdedup: error: …`` (not ``WARNING scrapy_zhdedup.cli.scan:``);
    a saved page that cannot be judged is named as a file, not as line 0 of it, and counted as a page."""
    site = tmp_path / "site"
    (site / "news").mkdir(parents=True)
    (site / "index.html").write_text("<html><body><script>menu()</script></body></html>", encoding="utf-8")
    (site / "news" / "a.html").write_text(f"<html><body><p>{articles(1)[0].text}</p></body></html>", encoding="utf-8")
    run = subprocess.run([sys.executable, "-m", "scrapy_zhdedup.cli", "scan", str(site), "-o", str(tmp_path / "v")],
                         capture_output=True, text=True, check=False, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    lines = run.stderr.splitlines()
    assert lines[0] == (f"zhdedup: warning: skipped {site / 'index.html'}: no text to judge (no words or Chinese "
                        "characters left after cleaning)")
    assert lines[1].startswith("zhdedup scan: 1 judged (1 unique, 0 exact, 0 near), 1 bad pages skipped, ")
