#!/usr/bin/env bash
# The test command (README, .ci/run). Installs with the test extras, starts this checkout's
# Elasticsearch 9 node on 127.0.0.1 and runs pytest; then, because the README promises
# Elasticsearch 8 as well, runs the Elasticsearch tests (-m es) again against this checkout's
# Elasticsearch 8 node with an 8.x client from a second virtualenv (.venv-es8). Nodes it started
# are stopped at the end; a node that was already running is left running.
# Extra arguments go to pytest, in both runs.
#
#   ZHDEDUP_TEST_ES_URL=URL  run once, against your own Elasticsearch 8/9 at URL (no node is started)
#   ZHDEDUP_TEST_ES8=0       skip the Elasticsearch 8 run
#   ZHDEDUP_ES_PORT          port of the 9.x node; ZHDEDUP_ES8_PORT that of the 8.x node
#                            (default for both: derived from the checkout, see scripts/es-node.sh)
# shellcheck disable=SC2317  # es9, es8 and stop_started are called indirectly
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

es9() { bash scripts/es-node.sh "$@"; }
es8() {
  env -u ZHDEDUP_ES_PORT ${ZHDEDUP_ES8_PORT:+ZHDEDUP_ES_PORT="$ZHDEDUP_ES8_PORT"} ZHDEDUP_ES_VERSION=8 \
    bash scripts/es-node.sh "$@"
}

started=()
stop_started() {
  local node
  for node in "${started[@]}"; do "$node" stop || true; done
}
trap stop_started EXIT

# Starts a node (es9 or es8) unless it already runs, and remembers it if we started it.
start_node() {
  "$1" status >/dev/null 2>&1 || started+=("$1")
  "$1" start >/dev/null
}

# pytest's exit 5 (nothing collected) must fail the main run: a green run that tested nothing is a bug.
run_pytest() {
  local python=$1 rc=0
  shift
  "$python" -m pytest "$@" || rc=$?
  if [ "$rc" -eq 5 ]; then
    echo "pytest collected no tests: failing on purpose" >&2
    return 1
  fi
  return "$rc"
}

bash scripts/bootstrap.sh test
if [ -n "${ZHDEDUP_TEST_ES_URL:-}" ]; then
  run_pytest .venv/bin/python "$@"
  exit
fi

rc=0
start_node es9
ZHDEDUP_TEST_ES_URL=$(es9 url) run_pytest .venv/bin/python "$@" || rc=$?

if [ "${ZHDEDUP_TEST_ES8:-1}" != 0 ]; then
  echo "== the Elasticsearch tests again, on Elasticsearch 8 with an 8.x client (.venv-es8)" >&2
  VENV=$root/.venv-es8 bash scripts/bootstrap.sh test "elasticsearch[async]>=8.13,<9"
  start_node es8
  ZHDEDUP_TEST_ES_URL=$(es8 url) run_pytest .venv-es8/bin/python -m es "$@" || rc=$?
fi
exit "$rc"
