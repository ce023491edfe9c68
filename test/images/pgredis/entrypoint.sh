#!/bin/sh
# Entrypoint of the svc-test/pgredis image: runs PostgreSQL, Redis or MariaDB in the foreground,
# chosen by SVC_ROLE or by the first argument (`postgres`, `redis` or `mysql`); anything else is
# exec'd as given. No server needs the network to start. Data: $PGDATA (default
# /var/lib/postgresql/data), /data for Redis and /var/lib/mysql for MariaDB, so each can be a
# volume. MariaDB's root password is MARIADB_ROOT_PASSWORD (or MYSQL_ROOT_PASSWORD), as in the
# official images; empty when neither is set.
set -e
role="${SVC_ROLE:-}"
if [ -z "$role" ] && { [ "${1:-}" = postgres ] || [ "${1:-}" = redis ] || [ "${1:-}" = mysql ]; }; then
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
mysql)
  mkdir -p /var/lib/mysql /run/mysqld
  chown -R mysql:mysql /var/lib/mysql /run/mysqld
  if [ ! -d /var/lib/mysql/mysql ]; then
    mariadb-install-db --user=mysql --datadir=/var/lib/mysql --auth-root-authentication-method=normal \
      --skip-test-db >/dev/null
    pw="${MARIADB_ROOT_PASSWORD:-${MYSQL_ROOT_PASSWORD:-}}"
    if [ -n "$pw" ]; then
      printf "FLUSH PRIVILEGES;\nALTER USER 'root'@'localhost' IDENTIFIED BY '%s';\n" "$pw" |
        mariadbd --user=mysql --datadir=/var/lib/mysql --bootstrap >/dev/null
    fi
  fi
  exec mariadbd --user=mysql --datadir=/var/lib/mysql --bind-address=0.0.0.0 "$@"
  ;;
*)
  exec "$@"
  ;;
esac
