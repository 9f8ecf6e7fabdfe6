#!/usr/bin/env bash
# redis.sh — a throwaway redis-server on 127.0.0.1 for the distributed-crawl tests and example
# (scrapy-redis's shared request queue and dupefilter).
#
# Usage: scripts/redis.sh {start|stop|status|url|--help}
#   start    install redis-server if missing, start this checkout's server, print its URL
#   stop     stop this checkout's server (never another checkout's, never a server it did not start)
#   status   "running pid=PID url=URL dir=DIR" (exit 0) or "stopped …" (exit 3)
#   url      the URL (redis://127.0.0.1:PORT/0), whether it runs or not
#
# What it runs and why
#   * Debian's redis-server (apt-get install redis-server, after apt-get update, when it is missing and we
#     are root with apt-get; otherwise it says what to install). The package's own service is not used.
#   * Loopback only: bound to 127.0.0.1 with protected mode on; no persistence (no RDB snapshots, no AOF):
#     a queue for tests and the example, thrown away with the server.
#   * One server per checkout, as scripts/es-node.sh does for Elasticsearch: the port is
#     26379 + (hash of the checkout's path mod 500), below Linux's ephemeral ports and clear of
#     es-node.sh's and es-cluster.sh's ranges (27700 and up); its directory is
#     <cache>/redis/<checkout id>-<port>/ (the file `checkout` there names the checkout). A pid is taken for
#     our server only if that process runs redis-server in that directory, so `stop` never stops another
#     checkout's server or a process that reused the pid.
#   * Unprivileged: as root, the server runs as the `redis` user Debian's package creates, in
#     /var/lib/zhdedup-redis/ (root's cache directory is not reachable by that user).
#
# Environment
#   ZHDEDUP_CACHE        cache root (default $HOME/.cache/scrapy-zhdedup); the servers live in $ZHDEDUP_CACHE/redis
#   ZHDEDUP_REDIS_PORT   port (default: derived from the checkout, see above)
set -euo pipefail
umask 022

readonly PORT_BASE=26379 PORT_SLOTS=500 RUN_USER=redis ROOT_BASE=/var/lib/zhdedup-redis

CACHE=${ZHDEDUP_CACHE:-$HOME/.cache/scrapy-zhdedup}
CHECKOUT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
CHECKOUT_ID=$(printf '%s' "$CHECKOUT" | sha256sum | cut -c1-12)
PORT=${ZHDEDUP_REDIS_PORT:-$((PORT_BASE + 16#${CHECKOUT_ID:0:8} % PORT_SLOTS))}
URL=redis://127.0.0.1:$PORT/0

die() { echo "redis: error: $*" >&2; exit 1; }
say() { echo "redis: $*" >&2; }
is_root() { [[ $(id -u) == 0 ]]; }

[[ $PORT =~ ^[0-9]+$ ]] && ((PORT > 0 && PORT < 65536)) || die "ZHDEDUP_REDIS_PORT must be a TCP port, got '$PORT'"

ensure_installed() {
    command -v redis-server >/dev/null && command -v redis-cli >/dev/null && return
    is_root && command -v apt-get >/dev/null ||
        die "redis-server is not installed; install Debian's redis-server package (apt-get install redis-server)"
    say "installing redis-server with apt-get"
    { apt-get update -q && apt-get install -y -q redis-server; } >&2
}

# As root, the server runs as $RUN_USER in $ROOT_BASE; otherwise as ourselves in the cache.
RUN_PREFIX=()
if is_root; then
    BASE=$ROOT_BASE
    RUN_PREFIX=(runuser -u "$RUN_USER" --)
else
    BASE=$CACHE/redis
fi
DIR=$BASE/$CHECKOUT_ID-$PORT
PID_FILE=$DIR/redis.pid

cli() { redis-cli -h 127.0.0.1 -p "$PORT" "$@"; }
port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; }

# The pid of our server if it is alive: a redis-server whose working directory is ours (it chdirs to
# --dir); a stale pid file is dropped.
running_pid() {
    local pid
    [[ -r $PID_FILE ]] || return 1
    pid=$(<"$PID_FILE")
    if [[ $pid =~ ^[0-9]+$ ]] && [[ $(readlink "/proc/$pid/cwd" 2>/dev/null) == "$DIR" ]] &&
        [[ $(readlink "/proc/$pid/exe" 2>/dev/null) == */redis-* ]]; then
        echo "$pid"
        return 0
    fi
    rm -f "$PID_FILE"
    return 1
}

start() {
    local pid i
    if pid=$(running_pid); then
        echo "$URL"
        return
    fi
    ensure_installed
    port_in_use && die "port $PORT on 127.0.0.1 is taken by another process; set ZHDEDUP_REDIS_PORT to use another port"
    mkdir -p "$DIR"
    echo "$CHECKOUT" >"$DIR/checkout"
    is_root && chown -R "$RUN_USER:" "$DIR"
    say "starting redis-server on $URL (data in $DIR)"
    # 9>&-: the daemon must not inherit the lock on fd 9, or every later command would wait for it.
    "${RUN_PREFIX[@]}" redis-server --bind 127.0.0.1 --port "$PORT" --protected-mode yes --dir "$DIR" \
        --daemonize yes --pidfile "$PID_FILE" --logfile "$DIR/redis.log" --save "" --appendonly no 9>&- \
        || die "redis-server failed to start; see $DIR/redis.log"
    for ((i = 0; i < 100; i++)); do
        [[ $(cli ping 2>/dev/null) == PONG ]] && running_pid >/dev/null && { echo "$URL"; return; }
        sleep 0.1
    done
    tail -n 20 "$DIR/redis.log" >&2 || true
    running_pid >/dev/null && stop
    die "redis-server did not answer on $URL within 10s"
}

stop() {
    local pid i
    if ! pid=$(running_pid); then
        say "not running (port $PORT)"
        return
    fi
    kill -TERM "$pid"
    for ((i = 0; i < 100; i++)); do
        kill -0 "$pid" 2>/dev/null || { rm -f "$PID_FILE"; say "stopped (pid $pid)"; return; }
        sleep 0.1
    done
    say "pid $pid ignored SIGTERM for 10s; sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    rm -f "$PID_FILE"
}

status() {
    local pid
    if pid=$(running_pid); then
        echo "running pid=$pid url=$URL dir=$DIR"
        return 0
    fi
    echo "stopped (port $PORT, checkout $CHECKOUT)"
    return 3
}

case ${1:-} in
start | stop | status) ;;
url) echo "$URL" && exit 0 ;;
-h | --help | help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0" && exit 0 ;;
*) die "usage: $0 {start|stop|status|url|--help}" ;;
esac
# Serialise control commands on one port (parallel test runners calling start).
mkdir -p "$BASE"
exec 9>"$BASE/$PORT.lock"
flock 9
"$1"
