#!/bin/sh
# Entrypoint of the svc-test/pgredis image: runs PostgreSQL or Redis in the foreground, chosen by
# SVC_ROLE or by the first argument (`postgres` or `redis`); anything else is exec'd as given.
# Neither server needs the network to start. Data: $PGDATA (default /var/lib/postgresql/data)
# and /data for Redis, so both can be volumes.
set -e
role="${SVC_ROLE:-}"
if [ -z "$role" ] && { [ "${1:-}" = postgres ] || [ "${1:-}" = redis ]; }; then
  role="$1"
fi
if [ -n "$role" ] && [ "${1:-}" = "$role" ]; then shift; fi

case "$role" in
postgres)
  PGDATA="${PGDATA:-/var/lib/postgresql/data}"
  mkdir -p "$PGDATA" /var/run/postgresql
  chown -R postgres:postgres "$PGDATA" /var/run/postgresql
  chmod 700 "$PGDATA"
  if [ ! -s "$PGDATA/PG_VERSION" ]; then
    runuser -u postgres -- initdb -D "$PGDATA" -U "${POSTGRES_USER:-postgres}" --auth=trust >/dev/null
    echo "listen_addresses = '*'" >>"$PGDATA/postgresql.conf"
    echo "host all all 0.0.0.0/0 trust" >>"$PGDATA/pg_hba.conf"
    if [ -n "${POSTGRES_DB:-}" ]; then
      echo "CREATE DATABASE \"$POSTGRES_DB\"" |
        runuser -u postgres -- postgres --single -D "$PGDATA" -j postgres >/dev/null
    fi
  fi
  exec runuser -u postgres -- postgres -D "$PGDATA" "$@"
  ;;
redis)
  mkdir -p /data
  chown redis:redis /data
  # No automatic saves: a dump.rdb only appears when someone runs SAVE/BGSAVE (the checkpoint).
  exec runuser -u redis -- redis-server --dir /data --bind 0.0.0.0 --protected-mode no \
    --save '' --appendonly no "$@"
  ;;
*)
  exec "$@"
  ;;
esac
