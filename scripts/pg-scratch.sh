#!/usr/bin/env bash
# A throw-away PostgreSQL cluster on loopback, for tests, benchmarks and scripts/ha-demo.sh:
# initdb and pg_ctl in DIR, run as an unprivileged user (PostgreSQL refuses root: as root
# it runs as the `postgres` account Debian's package creates), listening on 127.0.0.1 and
# a socket in DIR only, with trust authentication for the one database user `gantry`.
#
#   bash scripts/pg-scratch.sh start DIR   # prints the URL, postgresql://gantry@127.0.0.1:PORT/gantry
#   bash scripts/pg-scratch.sh stop DIR    # stops it and deletes DIR
#   bash scripts/pg-scratch.sh pause DIR / resume DIR   # SIGSTOP / SIGCONT the postmaster (tests)
#
# The cluster keeps PostgreSQL's durable defaults (fsync, synchronous_commit on), so a
# commit it acknowledges survives a crash of the server that made it.
set -euo pipefail
action=${1:?start, stop, pause or resume}
dir=${2:?a directory for the cluster}
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
if [ -z "$bin" ] || [ ! -x "$bin/initdb" ]; then
  echo "pg-scratch: PostgreSQL is not installed (run scripts/install-deps.sh)" >&2
  exit 2
fi

# As root: as `postgres`, from / (runuser keeps the caller's working directory, which
# `postgres` may not enter: a checkout under /root or a 0700 home; PostgreSQL's tools then
# print "could not change directory" where a caller reads their output).
as_owner() {
  if [ "$(id -u)" -eq 0 ]; then (cd / && runuser -u postgres -- "$@"); else "$@"; fi
}

case "$action" in
  start)
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    [ "$(id -u)" -eq 0 ] && chown postgres: "$dir"
    as_owner "$bin/initdb" -D "$dir/data" -U gantry --auth=trust --no-sync -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 ||
      { cat "$dir/initdb.log" >&2; exit 1; }
    # A free port: ask the kernel for one, then hand it to the postmaster. Another process
    # may take it in between (tests start clusters side by side): then try another.
    for try in 1 2 3 4 5; do
      port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
      if as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 30 \
        -o "-h 127.0.0.1 -p $port -k $dir -c max_connections=200" start >/dev/null; then
        break
      fi
      [ "$try" = 5 ] && { cat "$dir/server.log" >&2; exit 1; }
    done
    as_owner "$bin/createdb" -h 127.0.0.1 -p "$port" -U gantry gantry
    url="postgresql://gantry@127.0.0.1:$port/gantry"
    echo "$url" >"$dir/url"
    echo "$url"
    ;;
  stop)
    [ -d "$dir/data" ] && as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
    rm -rf "$dir"
    ;;
  pause | resume)
    pid=$(head -n 1 "$dir/data/postmaster.pid")
    kill -"$([ "$action" = pause ] && echo STOP || echo CONT)" "$pid"
    ;;
  *)
    echo "pg-scratch: unknown action $action" >&2
    exit 2
    ;;
esac
