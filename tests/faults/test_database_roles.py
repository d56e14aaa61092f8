"""The runtime's database role has rows only (ASVS 5.0 13.2.2; docs/operations.md "Database roles"): on a
private PostgreSQL server, scripts/database_roles.sql makes `handoff_owner`, which runs the migrations of both
databases, and `handoff_app`, as which a request is approved through the services and delivered by a real
`manage.py dispatch --once` to the receiver's database; as `handoff_app`, creating, altering, dropping or
truncating a table is refused, and the role is neither a superuser nor may create databases or roles."""

import subprocess

import psycopg
import pytest

from tests.processes import ROOT, bytecode_cache, manage_argv

pytestmark = [pytest.mark.postgres, pytest.mark.faults]

DATABASES = ("handoff", "handoff_delivery")
APPROVE_42 = (
    "from tests.factories import onboarding_world; "
    "from approvals.models import Request; from approvals.services import request_approve; "
    "w = onboarding_world(); "
    "r = Request.objects.get(workspace_id=7, number=42, revision=1); "
    "request_approve(workspace_id=7, number=42, revision=1, payload_hash=r.payload_hash, "
    "actor=w['alice'])"
)


def manage(server, role: str, *args: str) -> str:
    env = {
        "PATH": "/usr/bin:/bin",
        "DJANGO_SETTINGS_MODULE": "config.test_settings",
        "DATABASE_URL": server.url("handoff").replace(f"//{server.user}@", f"//{role}@"),
        "DELIVERY_DATABASE_URL": server.url("handoff_delivery").replace(
            f"//{server.user}@", f"//{role}@"
        ),
        "HANDOFF_DESTINATION": "in_process",
        "HANDOFF_WAKE_ON_COMMIT": "0",
        "HANDOFF_VAR_DIR": str(server.root / "var"),
        **bytecode_cache(),
    }
    done = subprocess.run(
        manage_argv(*args),
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        # A whole `migrate` is about 20 s of CPU; beside other work at a load of 20-28 it passed 300 s.
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    return done.stdout


def test_the_runtime_role_delivers_a_handoff_and_is_refused_every_ddl(private_postgres):
    server = private_postgres
    script = (ROOT / "scripts" / "database_roles.sql").read_text()
    for dbname in DATABASES:
        server.sql(script, dbname=dbname)
    manage(server, "handoff_owner", "migrate", "--no-input")
    manage(server, "handoff_owner", "migrate", "--no-input", "--database", "delivery")

    manage(server, "handoff_app", "shell", "-c", APPROVE_42)
    manage(server, "handoff_app", "dispatch", "--once", "--worker", "w1")

    [(state, key)] = server.sql("SELECT state, action_key FROM outbox_handoff", dbname="handoff")
    assert state == "delivered"
    assert server.sql(
        "SELECT count(*) FROM delivery_receivertask WHERE action_key = %s",
        dbname="handoff_delivery",
        params=(key,),
    ) == [(1,)]

    for dbname, table in (("handoff", "outbox_handoff"), ("handoff_delivery", "django_migrations")):
        for statement in (
            "CREATE TABLE intruder (id int)",
            f"ALTER TABLE {table} ADD COLUMN intruder int",
            f"DROP TABLE {table}",
            f"TRUNCATE {table}",
            f"CREATE INDEX intruder ON {table} (id)",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                server.sql(statement, dbname=dbname, user="handoff_app")
    [attributes] = server.sql(
        "SELECT rolsuper, rolcreatedb, rolcreaterole, rolbypassrls FROM pg_roles "
        "WHERE rolname = 'handoff_app'",
        dbname="handoff",
    )
    assert attributes == (False, False, False, False)
    # The tables belong to the migrations' role, not to the runtime's.
    owners = server.sql(
        "SELECT DISTINCT tableowner FROM pg_tables WHERE schemaname = 'public'", dbname="handoff"
    )
    assert owners == [("handoff_owner",)]
