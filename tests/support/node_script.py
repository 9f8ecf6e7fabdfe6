"""Stand-in checkouts for the tests of scripts/es-node.sh (integration: ports and identity; es: beside a
running node)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from tests.support import ROOT

SCRIPTS = ROOT / "scripts"


def stand_in_checkout(root: Path) -> Path:
    """A stand-in checkout: the scripts derive the nodes' identity from the directory they sit in."""
    (root / "scripts").mkdir(parents=True)
    for script in ("es-node.sh", "es-cluster.sh", "es-secure.sh"):
        shutil.copy(SCRIPTS / script, root / "scripts" / script)
    return root


def run_node_script(checkout: Path, command: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``scripts/es-node.sh COMMAND`` of ``checkout``, with ``env`` (and not this run's port or version)."""
    clean = {k: v for k, v in os.environ.items() if k not in ("ZHDEDUP_ES_PORT", "ZHDEDUP_ES_VERSION")}
    return subprocess.run(["bash", str(checkout / "scripts" / "es-node.sh"), command], env={**clean, **env},
                          capture_output=True, text=True, timeout=120, check=False)
