"""What the migration tests share: migrate the test database to given targets and back to the latest."""

from django.db import connection
from django.db.migrations.executor import MigrationExecutor


def migrate(targets):
    """The database migrated to `targets` (an `(app, None)` target unapplies the app), and the models of
    the state the applied targets make."""
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state([t for t in targets if t[1] is not None]).apps


def latest():
    """Every app's latest migration, the targets that bring a test's database back."""
    executor = MigrationExecutor(connection)
    return executor.loader.graph.leaf_nodes()
