#!/usr/bin/env bash
# A throwaway PostgreSQL for tests and CI: a cluster in DIR on a free loopback port, with a role
# `cachelens` (it may create databases: a test makes its own) owning a database `cachelens`
# (trust auth, 127.0.0.1 and DIR's socket only, C collation as SQLite compares text).
#   eval "$(scripts/pg-temp.sh start DIR)"   # exports CACHELENS_TEST_PG=postgres://cachelens@127.0.0.1:PORT/cachelens
#   scripts/pg-temp.sh stop DIR
# As root, the server runs as the `postgres` user (PostgreSQL refuses root), which then owns DIR.
set -euo pipefail

die() { echo "pg-temp: $*" >&2; exit 1; }
[ $# -eq 2 ] && { [ "$1" = start ] || [ "$1" = stop ]; } || die "usage: $0 start|stop DIR"
cmd=$1
mkdir -p "$2"
dir=$(cd "$2" && pwd)
data=$dir/data

bin=""
if command -v pg_config >/dev/null 2>&1 && [ -x "$(pg_config --bindir)/initdb" ]; then
  bin=$(pg_config --bindir)
else
  bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
fi
[ -n "$bin" ] && [ -x "$bin/initdb" ] && [ -x "$bin/pg_ctl" ] \
  || die "no PostgreSQL server found (pg_config --bindir, /usr/lib/postgresql/*/bin): install postgresql"

as_pg() { # run a server binary as the user that owns the cluster
  if [ "$(id -u)" = 0 ]; then (cd "$dir" && runuser -u postgres -- "$@"); else "$@"; fi
}
running() { [ -f "$data/postmaster.pid" ] && as_pg "$bin/pg_ctl" -D "$data" status >/dev/null 2>&1; }

if [ "$cmd" = stop ]; then
  if running; then as_pg "$bin/pg_ctl" -D "$data" -m fast -w stop >/dev/null; fi
  exit 0
fi

if ! running; then
  if [ "$(id -u)" = 0 ]; then
    id postgres >/dev/null 2>&1 || die "running as root needs a 'postgres' user to run the server"
    chown postgres "$dir"
    runuser -u postgres -- test -w "$dir" || die "$dir is not reachable by the postgres user"
  fi
  if [ ! -f "$data/PG_VERSION" ]; then
    as_pg "$bin/initdb" -D "$data" -U postgres --auth=trust --encoding=UTF8 --locale=C >"$dir/initdb.log" 2>&1 \
      || die "initdb failed: see $dir/initdb.log"
    printf 'local all all trust\nhost all all 127.0.0.1/32 trust\n' | as_pg tee "$data/pg_hba.conf" >/dev/null
  fi
  started=""
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    port=$((20000 + RANDOM % 40000))
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && continue   # taken
    if as_pg "$bin/pg_ctl" -D "$data" -l "$dir/server.log" -w -t 60 \
        -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c max_connections=200 -c fsync=off \
            -c synchronous_commit=off -c full_page_writes=off" start >/dev/null; then
      started=1; echo "$port" >"$dir/port"; break
    fi
  done
  [ -n "$started" ] || die "the server did not start: see $dir/server.log"
  psql_admin() { as_pg "$bin/psql" -X -q -v ON_ERROR_STOP=1 -h "$dir" -p "$port" -U postgres -d postgres "$@"; }
  [ -n "$(psql_admin -tAc "SELECT 1 FROM pg_roles WHERE rolname = 'cachelens'")" ] \
    || psql_admin -c "CREATE ROLE cachelens LOGIN CREATEDB"
  [ -n "$(psql_admin -tAc "SELECT 1 FROM pg_database WHERE datname = 'cachelens'")" ] \
    || psql_admin -c "CREATE DATABASE cachelens OWNER cachelens TEMPLATE template0 LC_COLLATE 'C' LC_CTYPE 'C'"
fi
port=$(cat "$dir/port")
echo "export CACHELENS_TEST_PG=postgres://cachelens@127.0.0.1:$port/cachelens"
