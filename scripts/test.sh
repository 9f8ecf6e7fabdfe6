#!/usr/bin/env bash
# The test command (README, .ci/run). Installs with the test extras, starts this checkout's
# Elasticsearch 9 node on 127.0.0.1 and runs pytest; then, because the README promises
# Elasticsearch 8 as well, runs the Elasticsearch tests (-m es: tests/es/ and the tests of tests/faults/
# that use a node; their conftests refuse a test there without its marker) again against this checkout's
# Elasticsearch 8 node with an 8.x client from a second virtualenv (.venv-es8). Nodes it started
# are stopped at the end; a node that was already running is left running. The tests that need more
# than the shared node start what they need themselves, once, and stop it after their module (the
# 3-node cluster of scripts/es-cluster.sh for -m cluster, the node with security and TLS of
# scripts/es-secure.sh for -m security, the redis-server of scripts/redis.sh for the distributed crawl);
# they run on Elasticsearch 9 only, and what an interrupted run left behind is stopped here too.
# Extra arguments go to pytest, in both runs.
#
#   ZHDEDUP_TEST_ES_URL=URL  run once, against your own Elasticsearch 8/9 at URL (no node is started)
#   ZHDEDUP_TEST_ES8=0       skip the Elasticsearch 8 run
#   ZHDEDUP_ES_PORT          port of the 9.x node; ZHDEDUP_ES8_PORT that of the 8.x node
#                            (default for both: derived from the checkout, see scripts/es-node.sh)
# shellcheck disable=SC2317  # es9, es8, cluster, secure, redis and stop_started are called indirectly
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

es9() { bash scripts/es-node.sh "$@"; }
cluster() { bash scripts/es-cluster.sh "$@"; }
secure() { bash scripts/es-secure.sh "$@"; }
redis() { bash scripts/redis.sh "$@"; }
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

# Remembers a node (es9 or es8) as ours to stop at the end, unless it already runs.
claim_node() {
  "$1" status >/dev/null 2>&1 || started+=("$1")
}

# pytest's exit 5 (nothing collected) fails the run: a green run that tested nothing is a bug.
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
# The report's browser test needs a headless Chromium and a Chinese font: installed when missing and
# when we may (root with apt-get); otherwise that one test is skipped, saying why.
bash scripts/chromium.sh >/dev/null || true
if [ -n "${ZHDEDUP_TEST_ES_URL:-}" ]; then
  run_pytest .venv/bin/python "$@"
  exit
fi

# One node after the other: measured under load on 2 cores, preparing the 8.x node while the 9.x
# run went on made the whole command slower (803 s against 681 s), the two competing for the CPU.
rc=0
claim_node cluster # started by the tests that need them; stopped here if a killed run left them running
claim_node secure
claim_node redis # the distributed-crawl tests' queue (scripts/redis.sh), started and stopped by them
claim_node es9
es9 start >/dev/null
ZHDEDUP_TEST_ES_URL=$(es9 url) run_pytest .venv/bin/python "$@" || rc=$?

if [ "${ZHDEDUP_TEST_ES8:-1}" != 0 ]; then
  echo "== the Elasticsearch tests again, on Elasticsearch 8 with an 8.x client (.venv-es8)" >&2
  VENV=$root/.venv-es8 bash scripts/bootstrap.sh test "elasticsearch[async,orjson]>=8.13,<9"
  claim_node es8
  es8 start >/dev/null
  es8_rc=0
  ZHDEDUP_TEST_ES_URL=$(es8 url) .venv-es8/bin/python -m pytest -m "es and not cluster and not security and not redis" "$@" || es8_rc=$?
  # Exit 5 here means the arguments selected no Elasticsearch test (the 9.x run above guards against an
  # empty suite), so there is nothing to repeat on 8.
  [ "$es8_rc" -eq 5 ] && echo "no Elasticsearch test among the selected ones: nothing to run on 8" >&2
  [ "$es8_rc" -eq 0 ] || [ "$es8_rc" -eq 5 ] || rc=$es8_rc
fi
exit "$rc"
