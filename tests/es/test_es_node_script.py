"""scripts/es-node.sh, beside the shared node: another checkout neither stops nor takes over a running node."""

from __future__ import annotations

import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.support.node_script import run_node_script, stand_in_checkout


@pytest.mark.es
def test_another_checkout_neither_stops_nor_takes_over_a_running_node(tmp_path: Path, es_url: str) -> None:
    host, port = urlsplit(es_url).hostname, urlsplit(es_url).port
    if host not in ("127.0.0.1", "localhost") or port is None:
        pytest.skip("the node is not on this machine")
    other = stand_in_checkout(tmp_path / "other")

    stop = run_node_script(other, "stop", ZHDEDUP_ES_PORT=str(port))
    assert stop.returncode == 0, stop.stderr
    assert "left running" in stop.stderr

    start = run_node_script(other, "start", ZHDEDUP_ES_PORT=str(port))
    assert start.returncode != 0
    assert f"port {port} on 127.0.0.1 is taken by" in start.stderr

    with urllib.request.urlopen(f"{es_url}/_cluster/health", timeout=30) as resp:
        assert resp.status == 200
