#!/usr/bin/env bash
# es-secure.sh — a throwaway Elasticsearch node with security on and TLS on HTTP, for the security tests.
#
# Usage: scripts/es-secure.sh {start|stop|status|url}
#
# The node es-node.sh runs (it sources es-node.sh: the same distribution, JDK, user, directories under
# nodes/<checkout id>-<port>/, pid checks), with what the minimal distribution ships for security:
#   * TLS on HTTP with a CA and a node certificate for 127.0.0.1/localhost made by bin/elasticsearch-certutil
#     on the first start (kept in <node dir>/certs, copied into the config directory on every start);
#   * the file realm: bin/elasticsearch-users makes a superuser, zhdedup-admin, whose password is generated
#     on the first start and kept in <node dir>/admin.password (mode 600). Users and roles of a test go
#     into the config directory's users, users_roles and roles.yml, which the node reads again every
#     second (the native realm and API keys need the security index, which needs a module the minimal
#     distribution lacks);
#   * transport TLS is not needed: one node, on loopback.
# Port: 30200 + slot (es-node.sh's slot of this checkout), clear of es-node.sh's 29200-30199 and of
# es-cluster.sh's ports. `start` prints the https URL and records it, the CA file, the admin's name and
# password and the node directory in <checkout>/.cache/es-secure.env (mode 600).
#
# Environment: as es-node.sh (ZHDEDUP_ES_VERSION, ES_JAVA_HOME, ZHDEDUP_ES_HEAP (default here 512m),
# ZHDEDUP_ES_START_TIMEOUT, ZHDEDUP_CACHE, ZHDEDUP_ES_HOME, ZHDEDUP_MAVEN_REPO).
set -euo pipefail
: "${ZHDEDUP_ES_HEAP:=512m}"
# shellcheck source=scripts/es-node.sh
source "$(dirname "${BASH_SOURCE[0]}")/es-node.sh"

die() { echo "es-secure: error: $*" >&2; exit 1; }
say() { echo "es-secure: $*" >&2; }

readonly SECURE_BASE=30200 ADMIN=zhdedup-admin
SECURITY_SETTINGS="xpack.security.enabled: true
xpack.security.http.ssl.enabled: true
xpack.security.http.ssl.certificate: certs/node.crt
xpack.security.http.ssl.key: certs/node.key
xpack.security.http.ssl.certificate_authorities: [certs/ca.crt]
# the file realm's users and roles are read again a second after they change
resource.reload.interval.high: 1s"

# Runs one of the distribution's command-line tools ($1) on this node's config directory.
tool() {
    local name=$1
    shift
    ES_JAVA_HOME=$JAVA_HOME_FOR_ES ES_PATH_CONF=$NODE_DIR/config "$(dist_dir)/bin/$name" "$@"
}

# The CA and the node's certificate (once), then in the config directory; the admin in the file realm.
configure_node() {
    local certs=$NODE_DIR/certs
    if [[ ! -r $certs/node/node.key ]]; then
        rm -rf "$certs" && mkdir -p "$certs"
        tool elasticsearch-certutil ca --silent --pem --out "$certs/ca.zip" >/dev/null
        unzip -q -o "$certs/ca.zip" -d "$certs"
        tool elasticsearch-certutil cert --silent --pem --ca-cert "$certs/ca/ca.crt" --ca-key "$certs/ca/ca.key" \
            --ip 127.0.0.1 --dns localhost --name node --out "$certs/node.zip" >/dev/null
        unzip -q -o "$certs/node.zip" -d "$certs"
    fi
    mkdir -p "$NODE_DIR/config/certs"
    cp "$certs/ca/ca.crt" "$certs/node/node.crt" "$certs/node/node.key" "$NODE_DIR/config/certs/"
    tool elasticsearch-users useradd "$ADMIN" -p "$(admin_password)" -r superuser >/dev/null
}

# The admin's password: made once, kept beside the node (mode 600).
admin_password() {
    local file=$NODE_DIR/admin.password
    if [[ ! -s $file ]]; then
        (umask 077 && head -c 24 /dev/urandom | base64 | tr -d '/+=' >"$file")
    fi
    cat "$file"
}

# curl's options for this node (its CA, the admin), in a file so that no password is on a command line.
curl_config() {
    local file=$NODE_DIR/curl.conf
    mkdir -p "$NODE_DIR"
    (umask 077 && printf 'cacert = "%s"\nuser = "%s:%s"\n' "$NODE_DIR/certs/ca/ca.crt" "$ADMIN" "$(admin_password)" >"$file")
    HTTP_OPTS=(-K "$file")
}

# Replaces es-node.sh's record: the URL, the CA and the admin, for the tests.
record() {
    mkdir -p "$(dirname "$RECORD")"
    (umask 077 && cat >"$RECORD" <<EOF
# Written by scripts/es-secure.sh start: the Elasticsearch node with security of this checkout.
ZHDEDUP_ES_URL=$URL
ZHDEDUP_ES_CA_CERTS=$NODE_DIR/certs/ca/ca.crt
ZHDEDUP_ES_ADMIN_USER=$ADMIN
ZHDEDUP_ES_ADMIN_PASSWORD=$(admin_password)
ZHDEDUP_ES_NODE_DIR=$NODE_DIR
EOF
    )
}

secure_main() {
    local cmd=${1:-}
    case $cmd in
    start | stop | status | url) ;;
    *) die "usage: $0 {start|stop|status|url}" ;;
    esac
    choose_version
    PORT=$((SECURE_BASE + $(checkout_slot)))
    URL=https://127.0.0.1:$PORT
    RECORD=$CHECKOUT/.cache/es-secure.env
    if [[ $cmd == url ]]; then
        echo "$URL"
        return
    fi
    command -v curl >/dev/null || die "curl is needed to reach a node over https with its own CA"
    command -v unzip >/dev/null || die "unzip is needed to unpack the certificates elasticsearch-certutil makes"
    choose_node_base
    curl_config
    mkdir -p "$NODE_BASE/nodes"
    exec 9>"$NODE_BASE/nodes/$PORT.lock"
    flock 9
    case $cmd in
    start) choose_jdk && start ;;
    stop) stop ;;
    status) status ;;
    esac
}

secure_main "$@"
