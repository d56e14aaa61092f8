"""What the migration tests share: migrate the test database to given targets and back to the latest."""

from django.db import connection, transaction
from django.db.migrations.exceptions import IrreversibleError
from django.db.migrations.executor import MigrationExecutor


class _Executor(MigrationExecutor):
    """Django's executor, with the states before the migrations it unapplies built in another order, once.

    Django walks every migration of the project in its plan order and renders the state at the first one to
    unapply: each applied migration after that, of any app, then re-renders the models it touches (most of
    a backward migrate's CPU in the migration tests: the renders, not the unapplying). What is unapplied is a
    migration and every applied migration that depends on it, so what stays is closed under its
    dependencies: here what stays is applied to the state first, unrendered, and rendered once, then what
    goes is applied to clones of it in Django's order. The state before each migration unapplied holds
    the models Django's would, and those of the migrations that stay and come after it in Django's order,
    which are in the database while it is unapplied.

    Django's `Migration.unapply` then builds the states between a migration's operations again from the
    state before it, re-rendering the models each operation touches (about half of a backward migrate's
    CPU): here they are kept from the pass above, which builds them as it does (`_operation_states`), and
    each operation's `database_backwards` runs with them as `Migration.unapply` runs it (`_unapply`)."""

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
        steps = {}
        for migration, _ in full_plan:
            if migration in unapplied:
                steps[migration], state = _operation_states(migration, state)
        for migration, _ in plan:
            self._unapply(migration, steps[migration], fake=fake)
        return staying

    def _unapply(self, migration, steps, fake):
        """`unapply_migration`, with `Migration.unapply`'s second phase run on the states of `steps`."""
        if not fake:
            with self.connection.schema_editor(atomic=migration.atomic) as schema_editor:
                for operation, to_state, from_state in steps:
                    atomic_operation = operation.atomic or (
                        migration.atomic and operation.atomic is not False
                    )
                    if not schema_editor.atomic_migration and atomic_operation:
                        with transaction.atomic(schema_editor.connection.alias):
                            operation.database_backwards(
                                migration.app_label, schema_editor, from_state, to_state
                            )
                    else:
                        operation.database_backwards(
                            migration.app_label, schema_editor, from_state, to_state
                        )
        for app_label, name in migration.replaces:
            self.recorder.record_unapplied(app_label, name)
        self.recorder.record_unapplied(migration.app_label, migration.name)


def _operation_states(migration, state):
    """`Migration.unapply`'s first phase: the states before and after each operation of `migration` from
    `state`, the state before it (last operation first), and the state after it."""
    steps = []
    new_state = state
    for operation in migration.operations:
        if not operation.reversible:
            raise IrreversibleError(f"Operation {operation} in {migration} is not reversible")
        new_state = new_state.clone()
        old_state = new_state.clone()
        operation.state_forwards(migration.app_label, new_state)
        steps.insert(0, (operation, old_state, new_state))
    return steps, new_state


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
