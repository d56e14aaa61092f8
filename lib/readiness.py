"""Whether this process can serve: every configured database answers, and every migration on disk is
applied to it. Read by /readyz (console/views/health_probes.py).

The reasons say which database and what is wrong, never the error text: a driver's message may carry a
host name, a user or a connection string, and /readyz is open to anyone who reaches the port.
"""

from functools import cache

from django.db import DatabaseError, connections
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.recorder import MigrationRecorder


@cache
def _migrations_on_disk() -> frozenset[tuple[str, str]]:
    """Every migration of the installed apps. Read from disk once: a running process's code does not change."""
    return frozenset(MigrationLoader(None, ignore_no_migrations=True).disk_migrations)


def database_problems() -> list[str]:
    """One line per database that cannot serve; empty when all can."""
    problems = []
    for alias in connections:
        try:
            with connections[alias].cursor() as cursor:
                cursor.execute("SELECT 1")
            applied = set(MigrationRecorder(connections[alias]).applied_migrations())
        except DatabaseError as exc:
            problems.append(f"database {alias}: unreachable ({type(exc).__name__})")
            continue
        pending = sorted(_migrations_on_disk() - applied)
        if pending:
            app, name = pending[0]
            problems.append(
                f"database {alias}: {len(pending)} migration(s) not applied (first: {app}.{name})"
            )
    return problems
