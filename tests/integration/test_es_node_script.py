"""scripts/es-node.sh gives each checkout its own ports and node (that it never stops or takes over another's,
beside a running node: tests/es/test_es_node_script.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.support import ROOT
from tests.support.node_script import run_node_script, stand_in_checkout

SCRIPT = ROOT / "scripts" / "es-node.sh"


def _port(checkout: Path, **env: str) -> int:
    proc = run_node_script(checkout, "url", **env)
    assert proc.returncode == 0, proc.stderr
    return int(proc.stdout.strip().rsplit(":", 1)[1])


def test_each_checkout_gets_its_own_stable_ports(tmp_path: Path) -> None:
    a, b = stand_in_checkout(tmp_path / "a"), stand_in_checkout(tmp_path / "b")
    a9, b9 = _port(a, ZHDEDUP_ES_VERSION="9"), _port(b, ZHDEDUP_ES_VERSION="9")
    assert a9 != b9
    assert _port(a, ZHDEDUP_ES_VERSION="9") == a9
    assert all(29200 <= p < 30200 and p % 2 == 0 for p in (a9, b9))
    assert _port(a, ZHDEDUP_ES_VERSION="8") == a9 + 1  # an 8.x and a 9.x node of one checkout coexist
    assert _port(a, ZHDEDUP_ES_VERSION="9", ZHDEDUP_ES_PORT="9333") == 9333


def test_help_prints_the_usage_and_what_it_does() -> None:
    proc = subprocess.run(["bash", str(SCRIPT), "--help"], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0 and proc.stdout.startswith("es-node.sh — ") and "ZHDEDUP_ES_PORT" in proc.stdout
    assert "Usage: scripts/es-node.sh {fetch|start|stop|status|url|--help}" in proc.stdout




def _ports(checkout: Path, script: str, command: str) -> list[int]:
    proc = subprocess.run(["bash", str(checkout / "scripts" / script), command], capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    return [int(url.rsplit(":", 1)[1]) for url in proc.stdout.strip().split(",")]


def test_the_cluster_and_the_secure_node_of_each_checkout_have_ports_of_their_own(tmp_path: Path) -> None:
    a, b = stand_in_checkout(tmp_path / "a"), stand_in_checkout(tmp_path / "b")
    clusters = [_ports(c, "es-cluster.sh", "urls") for c in (a, b)]
    secure = [_ports(c, "es-secure.sh", "url")[0] for c in (a, b)]
    assert all(len(ports) == 3 and all(30700 <= p < 32200 for p in ports) for ports in clusters)
    assert all(30200 <= p < 30700 for p in secure)
    nodes = [_port(c, ZHDEDUP_ES_VERSION="9") for c in (a, b)]
    mine = [{*clusters[i], secure[i], nodes[i], nodes[i] + 1} for i in (0, 1)]
    assert len(mine[0]) == len(mine[1]) == 6 and not mine[0] & mine[1]  # nothing shared, within or across
    assert _ports(a, "es-cluster.sh", "urls") == clusters[0]  # stable
