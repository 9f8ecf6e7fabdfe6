"""A dedicated Elasticsearch node that fault tests may SIGKILL and restart.

The shared test node (tests/support/es_node.py) must stay up for every other test, so faults get their own
node on a free port, started through ``scripts/es-node.sh`` like the shared one (only
``start|stop|status`` with ``ZHDEDUP_ES_PORT`` set are relied on).  A restart reuses the port and
the data directory, so what the node acknowledged before the kill is there afterwards, as after a
real crash.  At the end the node is stopped and its data directory removed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import urllib.request
from pathlib import Path

from tests.support.es_node import SCRIPT, START_TIMEOUT_S, STOP_TIMEOUT_S, EsNodeError, sigkill

_RUNNING = re.compile(r"^running pid=(\d+)", re.MULTILINE)


def free_port() -> int:
    """A TCP port nothing listens on right now (nothing may take it before the node does: a small risk)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class FaultNode:
    """One throwaway node: ``start``, ``stop`` (clean), ``kill`` (SIGKILL, no shutdown), ``restart``, ``destroy``."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._data_dirs: list[Path] = []

    def _script(self, command: str, timeout: float) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "ZHDEDUP_ES_PORT": str(self.port)}
        try:
            return subprocess.run(["bash", str(SCRIPT), command], capture_output=True, text=True,
                                  timeout=timeout, env=env, check=False)
        except subprocess.TimeoutExpired as exc:
            raise EsNodeError(f"{SCRIPT} {command} (port {self.port}) did not finish in {timeout:.0f}s") from exc

    def start(self) -> None:
        proc = self._script("start", START_TIMEOUT_S)
        if proc.returncode != 0:
            raise EsNodeError(f"fault node on port {self.port} did not start:\n{proc.stderr.strip()[-3000:]}")
        if not self._data_dirs:
            self._data_dirs = self._paths()

    def pid(self) -> int | None:
        """The node's pid while it runs (from ``es-node.sh status``), else None."""
        match = _RUNNING.search(self._script("status", 60).stdout)
        return int(match.group(1)) if match else None

    def kill(self) -> None:
        """SIGKILL the node, as an OOM killer or a power cut would, and wait until it is gone."""
        pid = self.pid()
        if pid is None:
            raise EsNodeError(f"fault node on port {self.port} is not running")
        sigkill(pid, "fault node")

    def stop(self) -> None:
        """Stop the node as an operator does (SIGTERM, a clean shutdown), as in a rolling restart."""
        proc = self._script("stop", STOP_TIMEOUT_S)
        if proc.returncode != 0:
            raise EsNodeError(f"fault node on port {self.port} did not stop:\n{proc.stderr.strip()[-3000:]}")

    def restart(self) -> None:
        """Start again on the same port and data directory (what the node acknowledged is kept)."""
        self.start()

    def destroy(self) -> None:
        """Stop the node and remove its data (and the per-port node directory holding it)."""
        try:
            self._script("stop", STOP_TIMEOUT_S)
        finally:
            for data in self._data_dirs:
                node_dir = data.parent
                mine = node_dir.name.split("-")[-1] == str(self.port)  # nodes/<port> or nodes/<checkout>-<port>
                shutil.rmtree(node_dir if mine else data, ignore_errors=True)

    def _paths(self) -> list[Path]:
        """The node's data directories, as the node itself reports them."""
        url = f"{self.url}/_nodes/_local/settings?filter_path=nodes.*.settings.path.data"
        with urllib.request.urlopen(url, timeout=30) as response:
            nodes = json.load(response)["nodes"]
        data = next(iter(nodes.values()))["settings"]["path"]["data"]
        return [Path(p) for p in (data if isinstance(data, list) else [data])]
