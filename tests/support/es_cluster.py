"""The checkout's 3-node cluster (scripts/es-cluster.sh), for tests that kill one of its nodes.

Started when a test module first needs it and stopped at the module's end if the module started it
(a cluster a developer left running stays running, with every node it had).  A killed node is
started again by :meth:`Cluster.heal` before the next test that needs all three.
"""

from __future__ import annotations

import os
import re
import subprocess

from tests.support import ROOT
from tests.support.es_node import START_TIMEOUT_S, STOP_TIMEOUT_S, EsNodeError, sigkill

SCRIPT = ROOT / "scripts" / "es-cluster.sh"
_NODE = re.compile(r"^node (\d+) (running pid=(\d+) )?(?:stopped )?url=(\S+)$", re.MULTILINE)


class Cluster:
    def __init__(self) -> None:
        self.urls: list[str] = []
        self.started_here = False

    def _script(self, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if k != "ZHDEDUP_ES_PORT"}
        try:
            return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout,
                                  env=env, check=False)
        except subprocess.TimeoutExpired as exc:
            raise EsNodeError(f"{SCRIPT} {' '.join(args)} did not finish within {timeout:.0f}s") from exc

    def pids(self) -> dict[int, int | None]:
        """Node number -> pid while it runs."""
        return {int(m[1]): int(m[3]) if m[3] else None for m in _NODE.finditer(self._script("status", timeout=60).stdout)}

    def start(self) -> None:
        self.started_here = any(pid is None for pid in self.pids().values())
        self.heal()

    def heal(self) -> None:
        """Every node running and the cluster green (nodes a test killed are started again)."""
        proc = self._script("start", timeout=START_TIMEOUT_S)
        if proc.returncode != 0:
            raise EsNodeError(f"{SCRIPT} start failed:\n{proc.stderr.strip()[-3000:]}")
        self.urls = proc.stdout.strip().split(",")

    def kill(self, node: int) -> None:
        """SIGKILL one node, as an OOM killer or a power cut would, and wait until it is gone."""
        pid = self.pids()[node]
        if pid is None:
            raise EsNodeError(f"node {node} of the cluster is not running")
        sigkill(pid, f"node {node}")

    def release(self) -> None:
        """Stop the cluster if this session started it, else leave it as it was found."""
        if self.started_here:
            self._script("stop", timeout=STOP_TIMEOUT_S)
        elif any(pid is None for pid in self.pids().values()):
            self.heal()
