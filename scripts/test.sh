#!/usr/bin/env bash
# The test command (README, .ci/run): install with test extras, start the real Elasticsearch
# node on 127.0.0.1 (unless ZHDEDUP_TEST_ES_URL points at your own ES 8/9), run pytest, stop it.
# Extra arguments go to pytest.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bash scripts/bootstrap.sh test
if [ -z "${ZHDEDUP_TEST_ES_URL:-}" ]; then
  if ! bash scripts/es-node.sh status >/dev/null 2>&1; then
    trap 'bash scripts/es-node.sh stop' EXIT  # only a node we started is ours to stop
  fi
  bash scripts/es-node.sh start
  ZHDEDUP_TEST_ES_URL=$(bash scripts/es-node.sh url)
  export ZHDEDUP_TEST_ES_URL
fi
set +e
.venv/bin/python -m pytest "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests: failing on purpose" >&2
  exit 1
fi
exit "$rc"
