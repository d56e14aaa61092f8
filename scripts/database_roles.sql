-- The console's PostgreSQL roles (docs/operations.md, "Database roles"): run as a superuser in each of the
-- two databases (source and receiver), after creating them and before the first migration:
--   psql -v ON_ERROR_STOP=1 -d handoff -f scripts/database_roles.sql
--   psql -v ON_ERROR_STOP=1 -d handoff_delivery -f scripts/database_roles.sql
-- handoff_owner owns the schema and its tables: migrations run as it (`manage.py migrate`, nothing else).
-- handoff_app is what the web processes, dispatchers and the cluster connect as: rows only (SELECT, INSERT,
-- UPDATE, DELETE) on the tables the owner's migrations create, no DDL, not a superuser. Passwords are set
-- apart, from the platform's secrets manager: ALTER ROLE handoff_app PASSWORD '...'.
-- Proven by tests/faults/test_database_roles.py.
DO $$
BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'handoff_owner') THEN
    CREATE ROLE handoff_owner LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS;
  END IF;
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'handoff_app') THEN
    CREATE ROLE handoff_app LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS;
  END IF;
END
$$;

-- Extensions need a superuser (or the database's CREATE privilege): made here, once, so that the owner's
-- migrations find them (their CREATE EXTENSION IF NOT EXISTS then does nothing). pg_trgm: the search indexes.
CREATE EXTENSION IF NOT EXISTS pg_trgm;

-- Only the owner creates objects in the schema; everyone else (PUBLIC, handoff_app) may only use it.
ALTER SCHEMA public OWNER TO handoff_owner;
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
GRANT USAGE ON SCHEMA public TO handoff_app;

-- Rows of every table the owner has created and will create (each migration's new table is covered).
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO handoff_app;
GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO handoff_app;
ALTER DEFAULT PRIVILEGES FOR ROLE handoff_owner IN SCHEMA public
  GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO handoff_app;
ALTER DEFAULT PRIVILEGES FOR ROLE handoff_owner IN SCHEMA public
  GRANT USAGE, SELECT ON SEQUENCES TO handoff_app;
