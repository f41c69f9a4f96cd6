#!/bin/sh
# Entrypoint of the Debian-built PostgreSQL image (postgres.Dockerfile): on first start, make
# the cluster the way the official image does from POSTGRES_USER/POSTGRES_PASSWORD/POSTGRES_DB,
# then run the server as the postgres user.
set -eu

: "${POSTGRES_USER:=postgres}"
: "${POSTGRES_DB:=$POSTGRES_USER}"
as_postgres() { setpriv --reuid=postgres --regid=postgres --init-groups "$@"; }

mkdir -p "$PGDATA" /run/postgresql
chown postgres:postgres "$PGDATA" /run/postgresql
chmod 0700 "$PGDATA"

if [ ! -s "$PGDATA/PG_VERSION" ]; then
    if [ -z "${POSTGRES_PASSWORD:-}" ]; then
        echo "hub-postgres: POSTGRES_PASSWORD is required to make the cluster" >&2
        exit 64
    fi
    pwfile=$(mktemp)
    printf '%s\n' "$POSTGRES_PASSWORD" > "$pwfile"
    chown postgres "$pwfile"
    as_postgres initdb --username="$POSTGRES_USER" --pwfile="$pwfile" --auth-local=trust \
        --auth-host=scram-sha-256 --encoding=UTF8 >/dev/null
    rm -f "$pwfile"
    {
        echo "listen_addresses = '*'"
        echo "unix_socket_directories = '/run/postgresql'"
    } >> "$PGDATA/postgresql.conf"
    echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
    if [ "$POSTGRES_DB" != "postgres" ]; then
        # Single-user mode: the database exists before the server takes its first connection.
        echo "CREATE DATABASE \"$POSTGRES_DB\" OWNER \"$POSTGRES_USER\";" |
            as_postgres postgres --single -D "$PGDATA" postgres >/dev/null
    fi
    echo "hub-postgres: made the cluster in $PGDATA (user $POSTGRES_USER, database $POSTGRES_DB)" >&2
fi

if [ "${1:-}" = "postgres" ]; then
    exec setpriv --reuid=postgres --regid=postgres --init-groups "$@"
fi
exec "$@"
