#!/bin/sh
# First start: a cluster owned by $POSTGRES_USER with its password and database, reached by password over the
# network (scram-sha-256); later starts use what the volume holds.
set -eu
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  printf '%s\n' "$POSTGRES_PASSWORD" > /tmp/pwfile
  initdb -D "$PGDATA" --username="$POSTGRES_USER" --pwfile=/tmp/pwfile --auth-local=trust \
    --auth-host=scram-sha-256 --encoding=UTF8 >/dev/null
  rm -f /tmp/pwfile
  echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
  echo "CREATE DATABASE \"$POSTGRES_DB\" OWNER \"$POSTGRES_USER\";" | postgres --single -D "$PGDATA" postgres >/dev/null
fi
exec "$@" -c listen_addresses='*'
