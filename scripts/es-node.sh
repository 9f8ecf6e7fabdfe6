#!/usr/bin/env bash
# es-node.sh — a throwaway single-node Elasticsearch (or OpenSearch) on 127.0.0.1 for tests, CI and benchmarks.
#
# Usage: scripts/es-node.sh {fetch|start|stop|status|url|--help}
#
# What it runs and why
#   * Artifact: org.elasticsearch.distribution.integ-test-zip:elasticsearch (type zip), resolved by its
#     Maven coordinates through `mvn dependency:unpack`. It is Elastic's minimal distribution: server +
#     modules transport-netty4, x-pack-core, x-pack-security, apm; no bundled JDK and no optional modules
#     (no painless, no ingest-common, no analysis plugins, and no rest-root: `GET /` answers 405, so use
#     _cluster/health rather than client.info()/ping()). Core search features we rely on (collapse,
#     search_after, point in time, bulk op_type=create, _index_template, terms) all work on it.
#   * Version (checked 2026-11 against Maven Central, through Maven only):
#       - The artifact's maven-metadata.xml on Central is incomplete: it lists up to 8.19.21 and no 9.x at
#         all, yet 9.x zips are there (without a .pom). So candidate versions were taken from the
#         metadata of a sibling artifact (org.elasticsearch.client:elasticsearch-rest-client, which lists
#         every release up to 9.5.6) and probed with `mvn dependency:get ...:zip`, newest first:
#         9.5.6, 9.5.1, 9.4.9, 9.4.2, 9.3.3, 9.3.1, 9.3.0 are absent; 9.2.8 (last 9.2 patch) is present,
#         as are 9.2.0, 9.1.0 and 9.0.0. Newest 9.x => 9.2.8.
#       - Newest 8.x: 8.19.21 (8.19.24 is absent).
#       - The older servers users still run (issue 41), same kind of minimal distribution, all on Java 17:
#         Elasticsearch 7.17.29 and 7.10.2 (the last Apache-2.0 release), both OSS builds (no x-pack: no point
#         in time, no security), and OpenSearch 2.19.2 (org.opensearch.distribution.integ-test-zip:opensearch,
#         no security plugin; GET / answers). OpenSearch 3.3.2 resolves too; 3.x needs Java >= 21.
#     ES 9.x needs Java >= 21; this machine has Debian's OpenJDK 17 and Temurin 25. 9.2.8 was verified to
#     start and serve on Temurin 25. Without overrides the script takes the newest JDK >= 21 under
#     /usr/lib/jvm with 9.2.8, and otherwise falls back to 8.19.21 on a JDK 17..24 (verified on OpenJDK 17).
#   * One node per checkout. Several checkouts (git worktrees, clones) on one machine each get their own
#     node: the HTTP port and the data directory are derived from the checkout's absolute path, so
#     `stop` in one checkout never stops the node another one is using. The port is
#     29200 + 2 * (hash of the path mod 500), plus 1 for Elasticsearch 8, so one checkout can run an 8.x
#     and a 9.x node side by side; the range lies below Linux's ephemeral ports and clear of 9200-9399.
#     The older servers take 24200 + 4 * (the same slot) + 0 for Elasticsearch 7.10, 1 for the other 7.x,
#     2 for OpenSearch 2.x, 3 for OpenSearch 3.x (24200-26199, clear of es-cluster.sh's and es-secure.sh's),
#     so every flavour of every checkout has its own port.
#     The node lives in nodes/<checkout id>-<port>/ (the file `checkout` there names the checkout), and
#     `start` records port, URL and directory in <checkout>/.cache/es-node-<port>.env. A port held by
#     another checkout's node is refused with that checkout's name. The distribution (dist/) is shared.
#   * Elasticsearch refuses to run as root. As root the script creates the system user zhdedup-es and runs
#     the node as that user (runuser). /root is mode 700, so when that user cannot reach the cache dir,
#     the node's tree goes to /var/lib/zhdedup-es instead (the Maven download stays in root's cache).
#
# Environment
#   ZHDEDUP_CACHE             cache root (default $HOME/.cache/scrapy-zhdedup); the node tree is $ZHDEDUP_CACHE/es
#   ZHDEDUP_ES_HOME           explicit node tree (dist/ + nodes/); overrides the rule above
#   ZHDEDUP_ES_PORT           HTTP port (default: derived from the checkout, see above)
#   ZHDEDUP_ES_VERSION        Elasticsearch version x.y.z, or 9 / 8 / 7 / 7.10 for the versions above, or
#                             opensearch-x.y.z / opensearch-2 / opensearch-3 for OpenSearch (default: 9 or 8,
#                             chosen from the JDKs, see above)
#   ES_JAVA_HOME              JDK to run the node with (default: chosen automatically; as root, a missing
#                             JDK 17 for Elasticsearch 8 is installed with apt-get)
#   ZHDEDUP_ES_HEAP           JVM heap, used for -Xms and -Xmx (default 1g)
#   ES_JAVA_OPTS              extra JVM options, passed on to the node (they win over ZHDEDUP_ES_HEAP)
#   ZHDEDUP_ES_START_TIMEOUT  seconds to wait for yellow health on start (default 300: a start takes ~35 s
#                             on 2 idle cores, but took >120 s on the same cores under a load of 8)
#   ZHDEDUP_MAVEN_REPO        Maven local repository to use (default: Maven's own, ~/.m2/repository)
set -euo pipefail
# Everything we create must be readable by the node's user (a different user when we run as root).
umask 022

readonly ES9_VERSION=9.2.8
readonly ES8_VERSION=8.19.21
readonly ES7_VERSION=7.17.29 ES710_VERSION=7.10.2
readonly OS2_VERSION=2.19.2 OS3_VERSION=3.3.2
readonly DEPENDENCY_PLUGIN=org.apache.maven.plugins:maven-dependency-plugin:3.8.1
readonly ES_USER=zhdedup-es
readonly ES_USER_HOME=/var/lib/zhdedup-es
readonly PORT_BASE=29200 OLDER_PORT_BASE=24200 PORT_SLOTS=500

CACHE=${ZHDEDUP_CACHE:-$HOME/.cache/scrapy-zhdedup}
HEAP=${ZHDEDUP_ES_HEAP:-1g}
START_TIMEOUT=${ZHDEDUP_ES_START_TIMEOUT:-300}
# The checkout this script belongs to, and a short stable id of its path.
CHECKOUT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
CHECKOUT_ID=$(printf '%s' "$CHECKOUT" | sha256sum | cut -c1-12)

die() { echo "es-node: error: $*" >&2; exit 1; }
say() { echo "es-node: $*" >&2; }

is_root() { [[ $(id -u) == 0 ]]; }

[[ $HEAP =~ ^[0-9]+[kKmMgG]$ ]] || die "ZHDEDUP_ES_HEAP must look like 512m or 1g, got '$HEAP'"
[[ $START_TIMEOUT =~ ^[0-9]+$ ]] || die "ZHDEDUP_ES_START_TIMEOUT must be whole seconds, got '$START_TIMEOUT'"

# --- JDK and version choice ------------------------------------------------------------------------

# Major Java version of a JDK home, read from its `release` file (no JVM start needed).
java_major() {
    local release=$1/release v
    [[ -x $1/bin/java && -r $release ]] || return 1
    v=$(sed -n 's/^JAVA_VERSION="\([0-9][0-9]*\).*/\1/p' "$release")
    [[ -n $v ]] && echo "$v"
}

# Newest JDK under /usr/lib/jvm whose major version is within [min, max].
find_jdk() {
    local min=$1 max=$2 best="" best_major=0 dir real major
    declare -A seen=()
    for dir in /usr/lib/jvm/*/; do
        real=$(readlink -f "$dir")
        [[ -n ${seen[$real]:-} ]] && continue
        seen[$real]=1
        major=$(java_major "$real") || continue
        if ((major >= min && major <= max && major > best_major)); then
            best=$real best_major=$major
        fi
    done
    [[ -n $best ]] && echo "$best"
}

# Sets FLAVOUR (elasticsearch or opensearch) and ES_VERSION from the override, else from ES_JAVA_HOME,
# else from the JDKs present (no JDK: 9).
choose_version() {
    local major
    FLAVOUR=elasticsearch
    if [[ -n ${ZHDEDUP_ES_VERSION:-} ]]; then
        case $ZHDEDUP_ES_VERSION in
        9) ES_VERSION=$ES9_VERSION ;;
        8) ES_VERSION=$ES8_VERSION ;;
        7) ES_VERSION=$ES7_VERSION ;;
        7.10) ES_VERSION=$ES710_VERSION ;;
        opensearch-2) FLAVOUR=opensearch ES_VERSION=$OS2_VERSION ;;
        opensearch-3) FLAVOUR=opensearch ES_VERSION=$OS3_VERSION ;;
        opensearch-*) FLAVOUR=opensearch ES_VERSION=${ZHDEDUP_ES_VERSION#opensearch-} ;;
        *) ES_VERSION=$ZHDEDUP_ES_VERSION ;;
        esac
    elif [[ -n ${ES_JAVA_HOME:-} ]]; then
        major=$(java_major "$ES_JAVA_HOME") || die "ES_JAVA_HOME=$ES_JAVA_HOME is not a JDK (no bin/java or release file)"
        ES_VERSION=$ES9_VERSION
        ((major >= 21)) || ES_VERSION=$ES8_VERSION
    elif find_jdk 21 999 >/dev/null || ! find_jdk 17 24 >/dev/null; then
        ES_VERSION=$ES9_VERSION
    else
        ES_VERSION=$ES8_VERSION
    fi
    [[ $ES_VERSION =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] ||
        die "ZHDEDUP_ES_VERSION must be x.y.z, 9, 8, 7, 7.10 or opensearch-x.y.z, opensearch-2, opensearch-3, got '$ZHDEDUP_ES_VERSION'"
    ARTIFACT=org.$FLAVOUR.distribution.integ-test-zip:$FLAVOUR
    # What the node's launcher reads: Elasticsearch's ES_* variables, OpenSearch's OPENSEARCH_* ones.
    ENV_PREFIX=ES
    [[ $FLAVOUR == opensearch ]] && ENV_PREFIX=OPENSEARCH
    return 0
}

# Offset of this flavour's port in its range (see the header): 9.x 0, 8.x 1 from 29200; the older from 24200.
port_offset() {
    local major=${ES_VERSION%%.*}
    if [[ $FLAVOUR == opensearch ]]; then
        ((major >= 3)) && echo 3 || echo 2
    elif ((major >= 8)); then
        ((major == 8)) && echo 1 || echo 0
    else
        [[ $ES_VERSION == 7.10.* ]] && echo 0 || echo 1
    fi
}

# Whether this node is one of the older servers, whose ports lie in the 24200 range.
older_server() { [[ $FLAVOUR == opensearch || ${ES_VERSION%%.*} -lt 8 ]]; }

# This checkout's slot (0..PORT_SLOTS-1): the ports of its nodes are derived from it (es-cluster.sh too).
checkout_slot() { echo $((16#${CHECKOUT_ID:0:8} % PORT_SLOTS)); }

# Sets PORT, URL and RECORD: the override, else this checkout's port for this major version.
choose_port() {
    local slot
    slot=$(checkout_slot)
    if older_server; then
        PORT=${ZHDEDUP_ES_PORT:-$((OLDER_PORT_BASE + 4 * slot + $(port_offset)))}
    else
        PORT=${ZHDEDUP_ES_PORT:-$((PORT_BASE + 2 * slot + $(port_offset)))}
    fi
    [[ $PORT =~ ^[0-9]+$ ]] || die "ZHDEDUP_ES_PORT must be a TCP port, got '$PORT'"
    ((PORT > 0 && PORT < 65536)) || die "ZHDEDUP_ES_PORT must be a TCP port, got '$PORT'"
    URL="http://127.0.0.1:${PORT}"
    RECORD=$CHECKOUT/.cache/es-node-$PORT.env
}

# Debian's JDK 17 for Elasticsearch 8, when we may install it (root with apt-get); bookworm has no 21.
install_jdk17() {
    is_root && command -v apt-get >/dev/null || return 1
    say "no JDK 17..24 for $FLAVOUR $ES_VERSION: installing openjdk-17-jdk-headless with apt-get"
    { apt-get install -y -q openjdk-17-jdk-headless || { apt-get update -q && apt-get install -y -q openjdk-17-jdk-headless; }; } >&2
}

# Sets JAVA_HOME_FOR_ES: ES_JAVA_HOME, else the newest fitting JDK under /usr/lib/jvm.
choose_jdk() {
    local major need=21
    # Elasticsearch 7.x/8.x and OpenSearch 2.x run on 17; OpenSearch 3.x and Elasticsearch 9.x need 21.
    [[ $ES_VERSION == [78].* || ($FLAVOUR == opensearch && ${ES_VERSION%%.*} -lt 3) ]] && need=17
    if [[ -n ${ES_JAVA_HOME:-} ]]; then
        JAVA_HOME_FOR_ES=$ES_JAVA_HOME
    elif ((need == 17)); then
        # 8.x is tested on 17; a newer JDK is the last resort.
        JAVA_HOME_FOR_ES=$(find_jdk 17 24 || { install_jdk17 && find_jdk 17 24; } || find_jdk 17 999) ||
            die "no JDK >= 17 under /usr/lib/jvm for $FLAVOUR $ES_VERSION; install one or set ES_JAVA_HOME"
    else
        JAVA_HOME_FOR_ES=$(find_jdk 21 999) ||
            die "no JDK >= 21 under /usr/lib/jvm for $FLAVOUR $ES_VERSION (with JDK 17, use ZHDEDUP_ES_VERSION=8); set ES_JAVA_HOME"
    fi
    major=$(java_major "$JAVA_HOME_FOR_ES") || die "$JAVA_HOME_FOR_ES is not a JDK (no bin/java or release file)"
    ((major >= need)) || die "$FLAVOUR $ES_VERSION needs Java >= $need, but $JAVA_HOME_FOR_ES is Java $major"
}

# --- users and directories -------------------------------------------------------------------------

ensure_es_user() {
    getent passwd "$ES_USER" >/dev/null && return
    say "creating system user $ES_USER"
    useradd --system --user-group --home-dir "$ES_USER_HOME" --no-create-home \
        --shell /usr/sbin/nologin "$ES_USER"
}

# Command prefix that runs the node as its user: $ES_USER when we are root, else ourselves.
NODE_USER_PREFIX=()
is_root && NODE_USER_PREFIX=(runuser -u "$ES_USER" --)

# True if $ES_USER can traverse the deepest existing part of a path (the rest we create, readable for all).
reachable_by_es_user() {
    local dir=$1
    while [[ ! -d $dir ]]; do dir=$(dirname "$dir"); done
    runuser -u "$ES_USER" -- test -x "$dir"
}

# Sets NODE_BASE (holds dist/ and nodes/). See the header for the root rule.
choose_node_base() {
    NODE_BASE=${ZHDEDUP_ES_HOME:-$CACHE/es}
    if is_root; then
        ensure_es_user
        if ! reachable_by_es_user "$NODE_BASE"; then
            [[ -z ${ZHDEDUP_ES_HOME:-} ]] || die "user $ES_USER cannot reach ZHDEDUP_ES_HOME=$NODE_BASE"
            NODE_BASE=$ES_USER_HOME
        fi
    fi
    mkdir -p "$NODE_BASE"
    NODE_BASE=$(cd "$NODE_BASE" && pwd -P)
    NODE_DIR=$NODE_BASE/nodes/$CHECKOUT_ID-$PORT
    PID_FILE=$NODE_DIR/es.pid
}

# --- fetch ------------------------------------------------------------------------------------------

dist_dir() { echo "$NODE_BASE/dist/$FLAVOUR-$ES_VERSION"; }

fetch() {
    local dist tmp
    dist=$(dist_dir)
    [[ -x $dist/bin/$FLAVOUR ]] && return
    command -v mvn >/dev/null || die "Maven (mvn) is needed to fetch $FLAVOUR; install it (apt-get install maven)"
    mkdir -p "$NODE_BASE/dist"
    tmp=$(mktemp -d "$NODE_BASE/dist/.unpack.XXXXXX")
    say "fetching $ARTIFACT:$ES_VERSION:zip with Maven"
    local -a mvn_args=(-B -q "$DEPENDENCY_PLUGIN:unpack" "-Dartifact=$ARTIFACT:$ES_VERSION:zip"
        "-DoutputDirectory=$tmp" -Dmdep.overWriteReleases=true)
    [[ -n ${ZHDEDUP_MAVEN_REPO:-} ]] && mvn_args+=("-Dmaven.repo.local=$ZHDEDUP_MAVEN_REPO")
    # Run outside any project so a pom.xml in the caller's directory cannot interfere. Maven's output
    # (colour codes even with -q) is shown only when it fails.
    if ! (cd "$tmp" && mvn "${mvn_args[@]}") >"$tmp.log" 2>&1; then
        cat "$tmp.log" >&2
        rm -rf "$tmp" "$tmp.log"
        die "Maven could not fetch $ARTIFACT:$ES_VERSION:zip"
    fi
    rm -f "$tmp.log"
    [[ -x $tmp/$FLAVOUR-$ES_VERSION/bin/$FLAVOUR ]] || { rm -rf "$tmp"; die "unexpected layout in $ARTIFACT:$ES_VERSION:zip"; }
    mv "$tmp/$FLAVOUR-$ES_VERSION" "$dist"
    rm -rf "$tmp"
    say "unpacked to $dist"
}

# --- node control -----------------------------------------------------------------------------------

# curl options a sibling adds to every request of its node (es-secure.sh: its CA and admin, from a file).
HTTP_OPTS=()

http_ok() {
    if command -v curl >/dev/null; then
        curl -fsS --max-time "${2:-10}" -o /dev/null "${HTTP_OPTS[@]}" "$1" 2>/dev/null
    else
        python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=float(sys.argv[2]))' \
            "$1" "${2:-10}" 2>/dev/null
    fi
}

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; }

# Node directory of an Elasticsearch process, read from its command line (the launcher passes our
# ES_TMPDIR, <node dir>/tmp, as -Djava.io.tmpdir; /proc/PID/cmdline is readable by every user);
# fails for any other process.
node_dir_of() {
    local tmp
    tmp=$(tr '\0' '\n' <"/proc/$1/cmdline" 2>/dev/null | sed -n 's/^-Djava\.io\.tmpdir=//p' | head -n 1)
    [[ $tmp == */tmp ]] && dirname "$tmp"
}

# Prints the pid of our node if it is alive, else nothing (and drops a stale pid file). The process
# must be the node of this directory: a reused pid is never taken for it, so never stopped.
running_pid() {
    local pid
    [[ -r $PID_FILE ]] || return 1
    pid=$(<"$PID_FILE")
    if [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null && [[ $(node_dir_of "$pid") == "$NODE_DIR" ]]; then
        echo "$pid"
        return 0
    fi
    rm -f "$PID_FILE"
    return 1
}

# Who listens on $PORT, in words: another checkout's node (named), some Elasticsearch, or a process.
port_owner() {
    local pid dir
    pid=$(ss -Hltnp "sport = :$PORT" 2>/dev/null | grep -o 'pid=[0-9]*' | head -n 1 | cut -d= -f2)
    [[ -n $pid ]] || { echo "another process"; return; }
    if dir=$(node_dir_of "$pid"); then
        if [[ -r $dir/checkout ]]; then
            echo "the Elasticsearch node of checkout $(<"$dir/checkout") (pid $pid, $dir)"
        else
            echo "an Elasticsearch node this script did not start for any checkout (pid $pid, $dir)"
        fi
    else
        echo "process $pid ($(ps -o comm= -p "$pid" 2>/dev/null || echo unknown))"
    fi
}

# Shows why a start failed: the node's own log, plus what the launcher printed outside it
# (its log lines start with "[", its errors and stack traces do not).
log_tail() {
    local server_log=$NODE_DIR/logs/zhdedup-test.log launcher_out=$NODE_DIR/logs/launcher.out
    if [[ -s $server_log ]]; then
        echo "----- last lines of $server_log -----" >&2
        tail -n 30 "$server_log" | cut -c1-500 >&2
    fi
    if [[ -s $launcher_out ]]; then
        echo "----- launcher messages ($launcher_out) -----" >&2
        grep -v '^\[' "$launcher_out" | tail -n 30 | cut -c1-500 >&2 || true
    fi
}

# What the siblings of this script (es-cluster.sh, es-secure.sh) change in a node's elasticsearch.yml:
# the cluster it forms, and its security settings (default: off, where the distribution has the module).
CLUSTER_NAME=zhdedup-test
DISCOVERY_SETTINGS="discovery.type: single-node"
SECURITY_SETTINGS=""

# What a sibling adds to a node's config directory before it starts (certificates, users); $1 is the
# distribution's directory.
configure_node() { :; }

# Node name of the node on port $1 (the cluster's initial masters are named by it).
node_name() { echo "zhdedup-$CHECKOUT_ID-$1"; }

# Writes the per-node config dir (ES_PATH_CONF): the distribution's files plus our settings.
write_config() {
    local dist=$1 conf=$NODE_DIR/config
    mkdir -p "$conf/jvm.options.d" "$NODE_DIR/data" "$NODE_DIR/logs" "$NODE_DIR/tmp"
    cp -pR "$dist/config/." "$conf/"
    # The 7.x and OpenSearch jvm.options write the GC log and error files under a relative logs/, resolved
    # against the distribution, which the node's user may not write to: the JVM would not start.
    sed -i "s|=logs/|=$NODE_DIR/logs/|g" "$conf/jvm.options"
    local security=$SECURITY_SETTINGS
    [[ -z $security && -d $dist/modules/x-pack-security ]] && security="xpack.security.enabled: false"
    cat >"$conf/$FLAVOUR.yml" <<EOF
# Written by scripts/es-node.sh; rewritten on every start.
cluster.name: $CLUSTER_NAME
node.name: $(node_name "$PORT")
network.host: 127.0.0.1
http.port: $PORT
$DISCOVERY_SETTINGS
path.data: $NODE_DIR/data
path.logs: $NODE_DIR/logs
# A test node on a nearly full disk must not turn indices read-only.
cluster.routing.allocation.disk.threshold_enabled: false
$security
EOF
    cat >"$conf/jvm.options.d/zhdedup.options" <<EOF
-Xms$HEAP
-Xmx$HEAP
EOF
}

start() {
    local pid began=$SECONDS left i
    if pid=$(running_pid); then
        wait_yellow "$pid" "$START_TIMEOUT" || { log_tail; die "Elasticsearch (pid $pid) runs but is not yellow on $URL"; }
        echo "$URL"
        return
    fi
    launch
    # The 7.x and OpenSearch launchers return before the node has written its pid file: wait for it a while.
    for ((i = 0; i < 300; i++)); do running_pid >/dev/null && break; sleep 0.2; done
    pid=$(running_pid) || abort_start "Elasticsearch exited right after starting"
    left=$((START_TIMEOUT - (SECONDS - began)))
    wait_yellow "$pid" $((left > 10 ? left : 10)) ||
        abort_start "Elasticsearch (pid $pid) not yellow on $URL within ${START_TIMEOUT}s"
    record
    echo "$URL"
}

# Starts the node of PORT/NODE_DIR in the background: returns once its process runs (not once it
# serves: a node of a cluster answers only when the cluster has formed); a failed launch is stopped.
launch() {
    local dist
    port_in_use && die "port $PORT on 127.0.0.1 is taken by $(port_owner); set ZHDEDUP_ES_PORT to use another port"
    fetch
    dist=$(dist_dir)
    mkdir -p "$NODE_DIR"
    # Data written by another version may not load; a test node's data is disposable.
    if [[ -r $NODE_DIR/version && $(<"$NODE_DIR/version") != "$ES_VERSION" ]]; then
        say "version changed ($(<"$NODE_DIR/version") -> $ES_VERSION): wiping $NODE_DIR/data"
        rm -rf "$NODE_DIR/data"
    fi
    echo "$ES_VERSION" >"$NODE_DIR/version"
    echo "$CHECKOUT" >"$NODE_DIR/checkout"
    write_config "$dist"
    configure_node "$dist"
    is_root && chown -R "$ES_USER:$ES_USER" "$NODE_DIR"
    say "starting $FLAVOUR $ES_VERSION on $URL (Java $(java_major "$JAVA_HOME_FOR_ES") at $JAVA_HOME_FOR_ES, heap $HEAP)"
    local rc=0
    # -d returns once the node has started (the server writes the -p pid file itself); `timeout`
    # bounds a launch that hangs.
    # The launcher's own JVM probes the node's flags in a "final-flags…" directory it never removes: under
    # the node's tmp (java.io.tmpdir), not /tmp, and the last start's only.
    rm -rf "$NODE_DIR"/tmp/final-flags*
    # Elasticsearch 7.10 reads JAVA_HOME (ES_JAVA_HOME came in 7.12); OpenSearch reads ES_'s variables under
    # OPENSEARCH_. The 7.x and OpenSearch launchers set java.io.tmpdir from *_TMPDIR themselves.
    (cd "$NODE_DIR" && timeout "$START_TIMEOUT" "${NODE_USER_PREFIX[@]}" env JAVA_HOME="$JAVA_HOME_FOR_ES" \
        "${ENV_PREFIX}_JAVA_HOME=$JAVA_HOME_FOR_ES" "${ENV_PREFIX}_PATH_CONF=$NODE_DIR/config" \
        "${ENV_PREFIX}_TMPDIR=$NODE_DIR/tmp" CLI_JAVA_OPTS="-Djava.io.tmpdir=$NODE_DIR/tmp" \
        "$dist/bin/$FLAVOUR" -d -p "$PID_FILE" \
        >"$NODE_DIR/logs/launcher.out" 2>&1 </dev/null 9>&-) || rc=$? # 9: the control lock, not the node's
    ((rc != 124)) || abort_start "Elasticsearch did not start within ${START_TIMEOUT}s"
    ((rc == 0)) || abort_start "Elasticsearch failed to start (launcher exit code $rc)"
}

# Writes <checkout>/.cache/es-node-<port>.env, so a person (or `source`) finds this checkout's node.
record() {
    mkdir -p "$(dirname "$RECORD")"
    cat >"$RECORD" <<EOF
# Written by scripts/es-node.sh start: the Elasticsearch test node of this checkout.
ZHDEDUP_ES_URL=$URL
ZHDEDUP_ES_PORT=$PORT
ZHDEDUP_ES_VERSION=$([[ $FLAVOUR == opensearch ]] && echo "opensearch-")$ES_VERSION
ZHDEDUP_ES_NODE_DIR=$NODE_DIR
EOF
}

# A node this invocation launched but that is not healthy is stopped, so no half-started node lingers.
abort_start() {
    log_tail
    running_pid >/dev/null && stop
    die "$1"
}

# Waits up to $2 seconds for yellow health; fails early if the process is gone.
wait_yellow() {
    local pid=$1 deadline=$((SECONDS + $2))
    while ((SECONDS < deadline)); do
        http_ok "$URL/_cluster/health?wait_for_status=yellow&timeout=5s" 10 && return 0
        kill -0 "$pid" 2>/dev/null || return 1
        sleep 0.2
    done
    return 1
}

# Stops this checkout's node only; whatever else holds the port is named and left alone.
stop() {
    local pid i
    if ! pid=$(running_pid); then
        rm -f "$RECORD"
        if port_in_use; then
            say "this checkout has no node on port $PORT; it is used by $(port_owner), left running"
        else
            say "not running (port $PORT)"
        fi
        return
    fi
    kill -TERM "$pid"
    for ((i = 0; i < 300; i++)); do # 60 s, polled often: a stop is the wait between two runs of scripts/test.sh
        kill -0 "$pid" 2>/dev/null || { rm -f "$PID_FILE" "$RECORD"; say "stopped (pid $pid)"; return; }
        sleep 0.2
    done
    say "pid $pid ignored SIGTERM for 60s; sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    rm -f "$PID_FILE" "$RECORD"
}

status() {
    local pid
    if pid=$(running_pid); then
        if http_ok "$URL/_cluster/health" 5; then
            echo "running pid=$pid url=$URL version=$(<"$NODE_DIR/version") dir=$NODE_DIR"
        else
            echo "starting pid=$pid url=$URL (not answering yet)"
        fi
        return 0
    fi
    echo "stopped (port $PORT, checkout $CHECKOUT)"
    return 3
}

# --- main -------------------------------------------------------------------------------------------

main() {
    local cmd=${1:-}
    case $cmd in
    fetch | start | stop | status | url) ;;
    -h | --help | help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0" && return 0 ;;
    *) die "usage: $0 {fetch|start|stop|status|url|--help}" ;;
    esac
    choose_version
    choose_port
    if [[ $cmd == url ]]; then
        echo "$URL"
        return
    fi
    choose_node_base
    # Serialise control commands on one port (e.g. parallel test runners calling start), across checkouts.
    mkdir -p "$NODE_BASE/nodes"
    exec 9>"$NODE_BASE/nodes/$PORT.lock"
    flock 9
    case $cmd in
    fetch) fetch && dist_dir ;;
    start) choose_jdk && start ;;
    stop) stop ;;
    status) status ;;
    esac
}

# Sourced by its siblings (es-cluster.sh, es-secure.sh) for the functions above; run, it is the command.
[[ ${BASH_SOURCE[0]} != "$0" ]] || main "$@"
