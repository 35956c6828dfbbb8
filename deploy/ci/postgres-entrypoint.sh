#!/bin/bash
# First start: initdb with POSTGRES_USER as the superuser (password POSTGRES_PASSWORD, required)
# and POSTGRES_DB created; every start: run postgres in the foreground, listening on all addresses.
set -euo pipefail
: "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD must be set}"
POSTGRES_USER=${POSTGRES_USER:-postgres}
POSTGRES_DB=${POSTGRES_DB:-$POSTGRES_USER}
if [ ! -s "$PGDATA/PG_VERSION" ]; then
	initdb -D "$PGDATA" --username="$POSTGRES_USER" --pwfile=<(printf '%s\n' "$POSTGRES_PASSWORD") \
		--auth-local=trust --auth-host=scram-sha-256 >/dev/null
	echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
	if [ "$POSTGRES_DB" != postgres ]; then
		echo "CREATE DATABASE \"$POSTGRES_DB\" OWNER \"$POSTGRES_USER\";" | postgres --single -D "$PGDATA" postgres >/dev/null
	fi
	echo "postgres-entrypoint: initialised $PGDATA (user $POSTGRES_USER, database $POSTGRES_DB)"
fi
exec postgres -D "$PGDATA" -c listen_addresses='*'
