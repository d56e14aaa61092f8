"""What the migration tests share: migrate the test database to given targets and back to the latest."""

from django.db import connection
from django.db.migrations.executor import MigrationExecutor


class _Executor(MigrationExecutor):
    """Django's executor, with the states before the migrations it unapplies built in another order.

    Django walks every migration of the project in its plan order and renders the state at the first one to
    unapply: each applied migration after that, of any app, then re-renders the models it touches (most of
    a backward migrate's CPU in the migration tests: the renders, not the unapplying). What is unapplied is a
    migration and every applied migration that depends on it, so what stays is closed under its
    dependencies: here what stays is applied to the state first, unrendered, and rendered once, then what
    goes is applied to clones of it in Django's order. The state before each migration unapplied holds
    the models Django's would, and those of the migrations that stay and come after it in Django's order,
    which are in the database while it is unapplied. The unapplying itself is Django's own."""

    def _migrate_all_backwards(self, plan, full_plan, fake):
        unapplied = {migration for migration, _ in plan}
        applied = {
            self.loader.graph.nodes[key]
            for key in self.loader.applied_migrations
            if key in self.loader.graph.nodes
        }
        state = self._create_project_state()
        for migration, _ in full_plan:
            if migration in applied and migration not in unapplied:
                migration.mutate_state(state, preserve=False)
        state.apps  # noqa: B018 -- rendered once: each state below starts from a clone of it
        staying = state
        states = {}
        for migration, _ in full_plan:
            if migration in unapplied:
                states[migration] = state
                state = migration.mutate_state(state, preserve=True)
        for migration, _ in plan:
            self.unapply_migration(states[migration], migration, fake=fake)
        return staying


def migrate(targets):
    """The database migrated to `targets` (an `(app, None)` target unapplies the app), and the models of
    the state the applied targets make."""
    executor = _Executor(connection)
    executor.migrate(targets)
    return executor.loader.project_state([t for t in targets if t[1] is not None]).apps


def latest():
    """Every app's latest migration, the targets that bring a test's database back."""
    executor = MigrationExecutor(connection)
    return executor.loader.graph.leaf_nodes()
