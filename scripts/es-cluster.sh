#!/usr/bin/env bash
# es-cluster.sh — a throwaway 3-node Elasticsearch cluster on 127.0.0.1 for the multi-node tests.
#
# Usage: scripts/es-cluster.sh {start|stop|status|urls} [NODE]
#   start [N]   start the three nodes (or only node N, 1..3: one a test killed), wait until the cluster
#               has its three nodes and is green, print the URLs
#   stop [N]    stop this checkout's three nodes (or node N)
#   status      one line per node ("node N running pid=PID url=URL" or "node N stopped url=URL");
#               exit 3 unless all three run
#   urls        the nodes' URLs separated by commas, as ZHDEDUP_ES_URL takes them
#
# It sources es-node.sh and runs each node as that script runs its one: the same distribution, JDK,
# user, directories under nodes/<checkout id>-<port>/, pid checks (a node of another checkout is never
# stopped) and refusal of a port someone else holds. What differs: each node's transport port and the
# discovery settings that make the three one cluster, named after the checkout (zhdedup-cluster-<id>),
# so no other checkout's node can join it; a heap of 512m per node by default. Ports, per checkout
# slot (es-node.sh's): HTTP 30700 + 3 * slot + i and transport 27700 + 3 * slot + i for i = 0, 1, 2,
# clear of es-node.sh's 29200-30199 and below Linux's ephemeral ports. <checkout>/.cache/es-cluster.env
# records the URLs.
#
# Environment: as es-node.sh (ZHDEDUP_ES_VERSION, ES_JAVA_HOME, ZHDEDUP_ES_HEAP, ZHDEDUP_ES_START_TIMEOUT,
# ZHDEDUP_CACHE, ZHDEDUP_ES_HOME, ZHDEDUP_MAVEN_REPO).
set -euo pipefail
: "${ZHDEDUP_ES_HEAP:=512m}"
# shellcheck source=scripts/es-node.sh
source "$(dirname "${BASH_SOURCE[0]}")/es-node.sh"

die() { echo "es-cluster: error: $*" >&2; exit 1; }
say() { echo "es-cluster: $*" >&2; }

readonly NODES=3 HTTP_BASE=30700 TRANSPORT_BASE=27700
CLUSTER_NAME=zhdedup-cluster-$CHECKOUT_ID
CLUSTER_RECORD=$CHECKOUT/.cache/es-cluster.env

http_port() { echo $((HTTP_BASE + NODES * $(checkout_slot) + $1 - 1)); }
transport_port() { echo $((TRANSPORT_BASE + NODES * $(checkout_slot) + $1 - 1)); }

# The discovery settings every node shares: the others' transport ports and the first masters' names.
discovery() {
    local i seeds=() masters=()
    for ((i = 1; i <= NODES; i++)); do
        seeds+=("127.0.0.1:$(transport_port "$i")")
        masters+=("$(node_name "$(http_port "$i")")")
    done
    local IFS=,
    printf 'discovery.seed_hosts: [%s]\ncluster.initial_master_nodes: [%s]' "${seeds[*]}" "${masters[*]}"
}

# Sets the globals es-node.sh's functions act on to node $1.
use_node() {
    PORT=$(http_port "$1")
    URL=http://127.0.0.1:$PORT
    RECORD=$CHECKOUT/.cache/es-node-$PORT.env
    NODE_DIR=$NODE_BASE/nodes/$CHECKOUT_ID-$PORT
    PID_FILE=$NODE_DIR/es.pid
    DISCOVERY_SETTINGS="transport.port: $(transport_port "$1")
$(discovery)"
}

urls() {
    local i out=()
    for ((i = 1; i <= NODES; i++)); do out+=("http://127.0.0.1:$(http_port "$i")"); done
    local IFS=,
    echo "${out[*]}"
}

# Waits until some node says the cluster has all its nodes and is green; fails early if one died.
wait_green() {
    local deadline=$((SECONDS + START_TIMEOUT)) i
    while ((SECONDS < deadline)); do
        for ((i = 1; i <= NODES; i++)); do
            use_node "$i"
            running_pid >/dev/null || { say "node $i ($URL) is not running"; return 1; }
            http_ok "$URL/_cluster/health?wait_for_nodes=$NODES&wait_for_status=green&timeout=5s" 10 && return 0
        done
        sleep 1
    done
    return 1
}

cluster_start() {
    local selected=("$@") i pids=() failed=0
    choose_jdk
    for i in "${selected[@]}"; do
        use_node "$i"
        running_pid >/dev/null && continue
        (launch) & # the nodes boot side by side: a cluster answers only once two of them run
        pids+=($!)
    done
    for i in "${pids[@]}"; do wait "$i" || failed=1; done
    ((failed == 0)) || die "a node of the cluster did not start (see above)"
    if ! wait_green; then
        for ((i = 1; i <= NODES; i++)); do use_node "$i" && log_tail; done
        die "the cluster did not reach green with $NODES nodes within ${START_TIMEOUT}s"
    fi
    for ((i = 1; i <= NODES; i++)); do use_node "$i" && record; done
    mkdir -p "$(dirname "$CLUSTER_RECORD")"
    printf '# Written by scripts/es-cluster.sh start: the test cluster of this checkout.\nZHDEDUP_ES_URL=%s\n' \
        "$(urls)" >"$CLUSTER_RECORD"
    urls
}

cluster_stop() {
    local i pids=()
    for i in "$@"; do
        use_node "$i"
        (stop) & # each waits for its node to exit
        pids+=($!)
    done
    for i in "${pids[@]}"; do wait "$i" || true; done
    (($# < NODES)) || rm -f "$CLUSTER_RECORD"
}

cluster_status() {
    local i pid all=0
    for ((i = 1; i <= NODES; i++)); do
        use_node "$i"
        if pid=$(running_pid); then
            echo "node $i running pid=$pid url=$URL"
        else
            echo "node $i stopped url=$URL"
            all=3
        fi
    done
    return "$all"
}

cluster_main() {
    local cmd=${1:-} only=${2:-} selected
    case $cmd in
    start | stop | status | urls) ;;
    *) die "usage: $0 {start|stop|status|urls} [NODE]" ;;
    esac
    [[ -z $only || $only =~ ^[1-9]$ && $only -le $NODES ]] || die "NODE must be 1 to $NODES, got '$only'"
    if [[ $cmd == urls ]]; then
        urls
        return
    fi
    choose_version
    PORT=$(http_port 1) # choose_node_base names a node directory after it
    choose_node_base
    mkdir -p "$NODE_BASE/nodes"
    exec 9>"$NODE_BASE/nodes/cluster-$CHECKOUT_ID.lock"
    flock 9
    if [[ -n $only ]]; then selected=("$only"); else mapfile -t selected < <(seq "$NODES"); fi
    case $cmd in
    start) cluster_start "${selected[@]}" ;;
    stop) cluster_stop "${selected[@]}" ;;
    status) cluster_status ;;
    esac
}

cluster_main "$@"
