#!/usr/bin/env bash
# Create a virtualenv (if missing) and install this project into it with the given extras, e.g. "test".
# Used by scripts/test.sh and scripts/demo.sh so both install the same way on a fresh machine.
#
# Usage: scripts/bootstrap.sh [EXTRAS [REQUIREMENT...]]
#   EXTRAS        comma-separated extras of this project ("test", "examples", "bench"; "" for none)
#   REQUIREMENT   more pip requirements installed in the same resolve, e.g. "elasticsearch[async]<9"
#   VENV          virtualenv directory (default .venv in the checkout)
#   PYTHON        interpreter that creates it (default python3)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
extras=${1:-}
shift || true
venv=${VENV:-$root/.venv}
python=${PYTHON:-python3}
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 10))'; then
  echo "scrapy-zhdedup needs Python >= 3.10 (found $("$python" --version 2>&1)); set PYTHON=..." >&2
  exit 1
fi
[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
# pip's -q does not quiet the build backend (setuptools prints a 10-line banner on every editable
# install): its output is shown only when the install fails.
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! { "$venv/bin/python" -m pip install -q --upgrade pip &&
  "$venv/bin/python" -m pip install -q -e "$root${extras:+[$extras]}" "$@"; } >"$log" 2>&1; then
  cat "$log" >&2
  exit 1
fi
