#!/usr/bin/env bash
# Runs once, when the postgres container initialises an empty data volume (the official image
# runs /docker-entrypoint-initdb.d/* as POSTGRES_USER against POSTGRES_DB). It sets up the two
# roles memvault expects (docs/operations.md, "Roles"):
#
#   memvault_owner  owns the database and so the tables: MEMVAULT_DATABASE_URL, migrations, admin.
#                   Not a superuser: the extension is created here, by the superuser, and the app
#                   role below already exists, so the first migration needs neither privilege.
#   memvault_app    the request path: MEMVAULT_APP_DATABASE_URL. The migration would create it
#                   NOLOGIN if it were missing; here it gets a login up front. Never a superuser,
#                   never BYPASSRLS, never the table owner, so row-level security applies to it.
#
# Passwords come from OWNER_DB_PASSWORD and APP_DB_PASSWORD (docker-compose.yml passes them;
# defaults are for local use only). Changing them later does not re-run this script: use
# ALTER ROLE ... PASSWORD, or remove the volume (docker compose down -v) to start over.
set -Eeo pipefail  # the entrypoint sources this file when it is not executable: no -u

: "${OWNER_DB_PASSWORD:?OWNER_DB_PASSWORD must be set}"
: "${APP_DB_PASSWORD:?APP_DB_PASSWORD must be set}"

# psql's :'var' quotes the values as SQL literals, so any password is safe here.
psql -v ON_ERROR_STOP=1 --no-psqlrc \
  --username "${POSTGRES_USER:-postgres}" --dbname "${POSTGRES_DB:-postgres}" \
  -v db="${POSTGRES_DB:-postgres}" \
  -v owner_password="$OWNER_DB_PASSWORD" \
  -v app_password="$APP_DB_PASSWORD" <<'SQL'
CREATE ROLE memvault_owner LOGIN PASSWORD :'owner_password'
  NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE;
CREATE ROLE memvault_app LOGIN PASSWORD :'app_password'
  NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE;

-- The owner of the database owns its public schema's CREATE right (PostgreSQL >= 15).
ALTER DATABASE :"db" OWNER TO memvault_owner;
-- pgvector is not a trusted extension, so the superuser creates it; the migration's
-- CREATE EXTENSION IF NOT EXISTS then finds it and needs no privilege.
CREATE EXTENSION IF NOT EXISTS vector;
SQL
