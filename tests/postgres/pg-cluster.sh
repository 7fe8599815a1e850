#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for the tests, benches and CI.
#
#   tests/postgres/pg-cluster.sh start [DIR]   initdb + pg_ctl start in DIR (a new temporary
#                                              directory by default); prints the conninfo
#                                              of its database on stdout (last line)
#   tests/postgres/pg-cluster.sh restart DIR   pg_ctl restart (fast shutdown), same port
#   tests/postgres/pg-cluster.sh stop DIR      pg_ctl stop, then removes DIR
#
# The cluster listens on 127.0.0.1 only, on a free port, with its Unix socket inside DIR.
# pg_ctl refuses to run as root, so when run as root the server runs as the `postgres`
# user (Debian's package creates it); otherwise as the calling user. Authentication is
# `trust` for the `sessiontree` role and `scram-sha-256` for every other, so tests can
# check that wrong credentials get a clear error.
set -euo pipefail

find_bin() {
    local name=$1
    if command -v "$name" >/dev/null 2>&1; then
        command -v "$name"
        return
    fi
    local found
    found=$(ls -d /usr/lib/postgresql/*/bin/"$name" 2>/dev/null | sort -V | tail -n 1 || true)
    [ -n "$found" ] || { echo "pg-cluster: $name not found (apt-get install postgresql)" >&2; exit 2; }
    echo "$found"
}

as_owner() {
    if [ "$(id -u)" = 0 ]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

free_port() {
    python3 - <<'EOF'
import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()
EOF
}

cmd=${1:-}
case "$cmd" in
start)
    INITDB=$(find_bin initdb)
    PG_CTL=$(find_bin pg_ctl)
    dir=${2:-$(mktemp -d /tmp/sessiontree-pg.XXXXXX)}
    mkdir -p "$dir"
    if [ "$(id -u)" = 0 ]; then
        chown postgres: "$dir"
    fi
    chmod 0700 "$dir"
    as_owner "$INITDB" -D "$dir/data" -U postgres -A trust --no-sync -E UTF8 --locale=C \
        >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; exit 1; }
    {
        echo "local all all trust"
        echo "host all sessiontree 127.0.0.1/32 trust"
        echo "host all postgres 127.0.0.1/32 trust"
        echo "host all all 127.0.0.1/32 scram-sha-256"
    } | as_owner tee "$dir/data/pg_hba.conf" >/dev/null
    port=$(free_port)
    # fsync stays on: the durability modes are measured against a server that syncs.
    as_owner "$PG_CTL" -D "$dir/data" -l "$dir/server.log" -w -t 60 start -o \
        "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$dir \
         -c max_connections=200 -c shared_buffers=128MB" >/dev/null \
        || { cat "$dir/server.log" >&2; exit 1; }
    psql_bin=$(find_bin psql)
    as_owner "$psql_bin" -X -q -h "$dir" -p "$port" -U postgres -d postgres -v ON_ERROR_STOP=1 \
        -c "CREATE ROLE sessiontree LOGIN SUPERUSER" \
        -c "CREATE ROLE sessiontree_pw LOGIN PASSWORD 'right-password'" \
        -c "CREATE DATABASE sessiontree OWNER sessiontree" >/dev/null
    echo "$port" >"$dir/port"
    echo "dir=$dir"
    echo "host=127.0.0.1 port=$port user=sessiontree dbname=sessiontree"
    ;;
restart)
    dir=${2:?usage: pg-cluster.sh restart DIR}
    PG_CTL=$(find_bin pg_ctl)
    as_owner "$PG_CTL" -D "$dir/data" -l "$dir/server.log" -m fast -w -t 60 restart >/dev/null \
        || { tail -n 20 "$dir/server.log" >&2; exit 1; }
    ;;
stop)
    dir=${2:?usage: pg-cluster.sh stop DIR}
    [ -d "$dir/data" ] || exit 0
    PG_CTL=$(find_bin pg_ctl)
    as_owner "$PG_CTL" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
    rm -rf "$dir"
    ;;
*)
    echo "usage: $0 start [DIR] | stop DIR" >&2
    exit 2
    ;;
esac
