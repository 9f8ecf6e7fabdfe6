#!/usr/bin/env bash
# Create .venv (if missing) and install this project into it with the given extras, e.g. "test".
# Sourced by scripts/test.sh and scripts/demo.sh so both install the same way on a fresh machine.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
extras=${1:-}
python=${PYTHON:-python3}
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 10))'; then
  echo "scrapy-zhdedup needs Python >= 3.10 (found $("$python" --version 2>&1)); set PYTHON=..." >&2
  exit 1
fi
[ -x "$root/.venv/bin/python" ] || "$python" -m venv "$root/.venv"
"$root/.venv/bin/python" -m pip install -q --upgrade pip
"$root/.venv/bin/python" -m pip install -q -e "$root${extras:+[$extras]}"
