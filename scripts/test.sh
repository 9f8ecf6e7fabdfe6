#!/usr/bin/env bash
# The test command (README, .ci/run). Installs with the test extras, starts this checkout's
# Elasticsearch 9 node on 127.0.0.1 and runs pytest; then, because the README promises the other servers
# as well, runs the Elasticsearch tests (-m es: tests/es/ and the tests of tests/faults/ that use a node;
# their conftests refuse a test there without its marker; not their embedded-store cases, marker embedded)
# again on each of them, one run after the other, each with its client from its own virtualenv:
# Elasticsearch 8 (an 8.x client, .venv-es8), Elasticsearch 7.10 (the es7 extra, .venv-es7) and
# OpenSearch 2.19 (the opensearch extra, .venv-opensearch). On 9 the
# fault, cluster and security tests run beside the rest (two pytest processes, below); a flavour's node is
# stopped once its run is over, 9's at the end; the next flavour's is started while the run before it goes
# on; a node that was already running is left running. The tests that need more
# than the shared node start what they need themselves, once, and stop it after their module (the
# 3-node cluster of scripts/es-cluster.sh for -m cluster, the node with security and TLS of
# scripts/es-secure.sh for -m security, the redis-server of scripts/redis.sh for the distributed crawl);
# they run on Elasticsearch 9 only, and what an interrupted run left behind is stopped here too.
# Extra arguments go to pytest, in both runs.
#
#   ZHDEDUP_TEST_ES_URL=URL  run once, against your own server at URL (no node is started)
#   ZHDEDUP_TEST_FLAVOURS    the servers run after 9 (default "8 7.10 opensearch-2": es-node.sh's
#                            ZHDEDUP_ES_VERSION names; "" for none)
#   ZHDEDUP_ES_PORT          port of the 9.x node; ZHDEDUP_ES8_PORT that of the 8.x node
#                            (default for all: derived from the checkout and the flavour, see scripts/es-node.sh)
# shellcheck disable=SC2317  # es9, flavour, cluster, secure, redis and stop_started are called indirectly
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
# The suites that run on 9 only, in a lane of their own (below): mostly waiting on nodes that start, die and come back.
LANE_MARKS="fault or cluster or security"
# The throwaway nodes compile with C1 only: a node's start costs half the CPU (21.5 s against 10.6 s, 9.2.8),
# and tests/es's batch, backend and rerun modules 46 s of the node's CPU against 74 s (their wall 112 s
# against 105 s): on 2 cores with two lanes and their nodes, CPU is what the run waits for. An
# ES_JAVA_OPTS of the caller's wins (set and empty: the JVM's defaults).
export ES_JAVA_OPTS=${ES_JAVA_OPTS--XX:TieredStopAtLevel=1}

es9() { bash scripts/es-node.sh "$@"; }
cluster() { bash scripts/es-cluster.sh "$@"; }
secure() { bash scripts/es-secure.sh "$@"; }
redis() { bash scripts/redis.sh "$@"; }
# The node of one flavour (es-node.sh's ZHDEDUP_ES_VERSION) : flavour VERSION COMMAND.
flavour() {
  local version=$1 port=
  shift
  [ "$version" = 8 ] && port=${ZHDEDUP_ES8_PORT:-}
  env -u ZHDEDUP_ES_PORT ${port:+ZHDEDUP_ES_PORT="$port"} ZHDEDUP_ES_VERSION="$version" bash scripts/es-node.sh "$@"
}

started=()
declare -A preparing=() was_running=() # flavour -> pid of prepare_flavour; -> 1 if its node ran before
lane= # pid of the background lane of the 9.x run, while it runs
stop_started() {
  local node version
  if [ -n "$lane" ]; then
    kill -INT "$lane" 2>/dev/null || true # KeyboardInterrupt: its fixtures stop the nodes they started
    wait "$lane" 2>/dev/null || true
  fi
  for node in "${started[@]}"; do "$node" stop || true; done
  for version in "${!preparing[@]}"; do
    kill "${preparing[$version]}" 2>/dev/null || true
    [ "${was_running[$version]}" = 1 ] || flavour "$version" stop >/dev/null 2>&1 || true
  done
}
trap stop_started EXIT

# Remembers a node (es9, cluster, secure) as ours to stop at the end, unless it already runs.
claim_node() {
  "$1" status >/dev/null 2>&1 || started+=("$1")
}

# The virtualenv and what it installs for a flavour's client: elasticsearch 8.x, the es7 or opensearch extra.
flavour_venv() {
  case $1 in
  8) echo ".venv-es8 test elasticsearch[async,orjson]>=8.13,<9" ;;
  7*) echo ".venv-es7 test,es7" ;;
  opensearch*) echo ".venv-opensearch test,opensearch" ;;
  *) echo "scripts/test.sh: no client known for flavour '$1'" >&2; return 1 ;;
  esac
}

# Readies one flavour in the background: its venv (its client), then its node; says in .cache/flavour-VERSION.log
# how it went. Started while the previous run goes on, so that the node is up when its turn comes.
prepare_flavour() {
  local version=$1 venv extras requirement
  read -r venv extras requirement <<<"$(flavour_venv "$version")"
  mkdir -p .cache
  {
    VENV=$root/$venv bash scripts/bootstrap.sh "$extras" ${requirement:+"$requirement"} &&
      flavour "$version" start >/dev/null
  } >".cache/flavour-$version.log" 2>&1 &
  preparing[$version]=$!
}

# The Elasticsearch tests on one more flavour (readied by prepare_flavour): its node is stopped after, unless
# it was running before this command.
run_flavour() {
  local version=$1 venv began=$SECONDS frc=0
  shift
  read -r venv _ <<<"$(flavour_venv "$version")"
  echo "== the Elasticsearch tests again, on $version with its client ($venv)" >&2
  if ! wait "${preparing[$version]}"; then
    cat ".cache/flavour-$version.log" >&2
    echo "scripts/test.sh: could not ready $version (above)" >&2
    return 1
  fi
  ZHDEDUP_TEST_ES_URL=$(flavour "$version" url) "$venv/bin/python" -m pytest -m "es and not ($LANE_MARKS or embedded)" \
    "$@" || frc=$?
  [ "${was_running[$version]}" = 1 ] || flavour "$version" stop >/dev/null || true
  # Exit 5 here means the arguments selected no Elasticsearch test (the 9.x run above guards against an
  # empty suite), so there is nothing to repeat.
  [ "$frc" -eq 5 ] && echo "no Elasticsearch test among the selected ones: nothing to run on $version" >&2
  echo "== $version: $((SECONDS - began)) s" >&2
  [ "$frc" -eq 0 ] || [ "$frc" -eq 5 ] || return "$frc"
}

# The exit of a suite run as one or more pytest processes (the two lanes on 9), from theirs: pytest's exit 5
# (nothing collected) is fine in one of them, but fails the run when every one collected nothing: a green
# run that tested nothing is a bug.
suite_rc() {
  local code worst=0 empty=1
  for code in "$@"; do
    [ "$code" -eq 5 ] || empty=0
    [ "$code" -eq 0 ] || [ "$code" -eq 5 ] || worst=$code
  done
  if [ "$empty" -eq 1 ]; then
    echo "pytest collected no tests: failing on purpose" >&2
    return 1
  fi
  return "$worst"
}

run_pytest() {
  local python=$1 rc=0
  shift
  "$python" -m pytest "$@" || rc=$?
  suite_rc "$rc"
}

bash scripts/bootstrap.sh test
# The report's browser test needs a headless Chromium and a Chinese font: installed when missing and
# when we may (root with apt-get); otherwise that one test is skipped, saying why.
bash scripts/chromium.sh >/dev/null || true
if [ -n "${ZHDEDUP_TEST_ES_URL:-}" ]; then
  run_pytest .venv/bin/python "$@"
  exit
fi

# On 9 the suite runs in two lanes side by side: the fault, cluster and security tests (mostly waiting on
# nodes that start, die and come back) in the background, their output kept in .cache/test-lane-faults.log
# and shown when they are over, and the rest in the foreground; the flavours follow the foreground lane,
# one after the other. The next flavour's node is readied (its venv, its start) while the suite before it
# runs, and waits idle for its turn. One lane runs the whole suite when the arguments carry their own -m.
# On 2 cores: 36 min 50 s in one lane, 28 min 51 s in two, 19-28 min in two with the nodes on C1 (2026-12-02),
# 26 min 46 s with the first flavour readied during the 9 run (2026-12-03; benchmarks/README.md, CI cost).
rc=0
claim_node cluster # started by the tests that need them; stopped here if a killed run left them running
claim_node secure
claim_node redis # the distributed-crawl tests' queue (scripts/redis.sh), started and stopped by them
claim_node es9
es9 start >/dev/null
read -r -a flavours <<<"${ZHDEDUP_TEST_FLAVOURS-8 7.10 opensearch-2}"
for version in "${flavours[@]}"; do
  was_running[$version]=0
  flavour "$version" status >/dev/null 2>&1 && was_running[$version]=1
done
# The first flavour's venv and node are readied while 9's suite runs (about 70 s of CPU; made after it, they
# were 114-181 s of waiting between the two).
[ "${#flavours[@]}" -eq 0 ] || prepare_flavour "${flavours[0]}"
export ZHDEDUP_TEST_ES_URL
ZHDEDUP_TEST_ES_URL=$(es9 url)
if printf '%s\n' "$@" | grep -qE '^-m'; then
  run_pytest .venv/bin/python "$@" || rc=$?
else
  mkdir -p .cache
  lane_log=.cache/test-lane-faults.log
  .venv/bin/python -m pytest -m "$LANE_MARKS" "$@" >"$lane_log" 2>&1 &
  lane=$!
  main_rc=0
  .venv/bin/python -m pytest -m "not ($LANE_MARKS)" "$@" || main_rc=$?
fi
unset ZHDEDUP_TEST_ES_URL

for i in "${!flavours[@]}"; do
  next=${flavours[i + 1]:-}
  [ -z "$next" ] || prepare_flavour "$next"
  run_flavour "${flavours[i]}" "$@" || rc=$?
done

if [ -n "$lane" ]; then
  lane_rc=0
  wait "$lane" || lane_rc=$?
  lane=
  echo "== the fault, cluster and security tests on 9, run beside the others (their time: pytest's last line)" >&2
  cat "$lane_log"
  suite_rc "$main_rc" "$lane_rc" || rc=$?
fi
exit "$rc"
