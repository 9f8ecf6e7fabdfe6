"""Several node URLs on a real node: a dead URL before the live one costs nothing (a real cluster losing a
node: tests/es/test_es_cluster.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from scrapy_zhdedup.cli.main import main
from tests.support.fault_node import free_port
from tests.support.helpers import write_jsonl
from tests.support.zhtexts import articles


@pytest.mark.es
def test_a_dead_url_before_a_live_one_costs_nothing(es_url: str, index: str, tmp_path: Path) -> None:
    """The dead node's requests go to the live one: every document stored, nothing dead-lettered, one line
    saying that a node failed (not the client's traceback per retry)."""
    dead = f"http://127.0.0.1:{free_port()}"
    records = [{"id": f"d{i}", "text": a.text} for i, a in enumerate(articles(30, max_chars=800))]
    src = write_jsonl(tmp_path / "corpus.jsonl", records)
    proc = subprocess.run([sys.executable, "-m", "scrapy_zhdedup.cli", "es", "ingest", str(src), "--index", index,
                           "--url", f"{dead},{es_url}", "--bulk-size", "5", "--workers", "1",
                           "--checkpoint-dir", str(tmp_path / "ck"), "--dead-letter", str(tmp_path / "dead.jsonl")],
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "30 judged" in proc.stdout and not (tmp_path / "dead.jsonl").exists()
    assert "Traceback" not in proc.stderr and "Retrying request" not in proc.stderr, proc.stderr[-3000:]
    assert f"zhdedup: warning: Elasticsearch node {dead} failed a request" in proc.stderr
    code = main(["es", "status", "--index", index, "--url", f"{dead},{es_url}", "--json"])
    assert code == 0
