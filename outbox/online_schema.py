"""Migration operations that are safe while dispatchers run, on both backends (docs/operations.md, "Upgrades").

PostgreSQL builds an index on a hot table `CONCURRENTLY` (writes go on during the build); Django's
`AddIndexConcurrently` only runs there. SQLite, the embedded default, has one writer and no concurrent
build: there the same operation is a plain `AddIndex`. A migration using it sets `atomic = False`. A
partial unique constraint is a unique index on PostgreSQL: added and removed the same way.
"""

from django.contrib.postgres.operations import AddIndexConcurrently, RemoveIndexConcurrently
from django.db.migrations.operations import AddConstraint, AddIndex, RemoveConstraint, RemoveIndex


class AddIndexOnline(AddIndexConcurrently):
    """`CREATE INDEX CONCURRENTLY` on PostgreSQL, a plain `CREATE INDEX` on any other backend."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == "postgresql":
            return super().database_forwards(app_label, schema_editor, from_state, to_state)
        return AddIndex.database_forwards(self, app_label, schema_editor, from_state, to_state)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == "postgresql":
            return super().database_backwards(app_label, schema_editor, from_state, to_state)
        return AddIndex.database_backwards(self, app_label, schema_editor, from_state, to_state)


class RemoveIndexOnline(RemoveIndexConcurrently):
    """`DROP INDEX CONCURRENTLY` on PostgreSQL, a plain `DROP INDEX` on any other backend."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == "postgresql":
            return super().database_forwards(app_label, schema_editor, from_state, to_state)
        return RemoveIndex.database_forwards(self, app_label, schema_editor, from_state, to_state)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == "postgresql":
            return super().database_backwards(app_label, schema_editor, from_state, to_state)
        return RemoveIndex.database_backwards(self, app_label, schema_editor, from_state, to_state)


def _concurrently(sql: str) -> str:
    return sql.replace("CREATE UNIQUE INDEX", "CREATE UNIQUE INDEX CONCURRENTLY", 1)


class AddConstraintOnline(AddConstraint):
    """A partial unique constraint (PostgreSQL makes it a unique index) built `CONCURRENTLY` on
    PostgreSQL; a plain `AddConstraint` on any other backend."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        model = to_state.apps.get_model(app_label, self.model_name)
        if schema_editor.connection.vendor != "postgresql":
            return super().database_forwards(app_label, schema_editor, from_state, to_state)
        if self.allow_migrate_model(schema_editor.connection.alias, model):
            schema_editor.execute(
                _concurrently(str(self.constraint.create_sql(model, schema_editor)))
            )

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor != "postgresql":
            return super().database_backwards(app_label, schema_editor, from_state, to_state)
        schema_editor.execute(
            f"DROP INDEX CONCURRENTLY IF EXISTS {schema_editor.quote_name(self.constraint.name)}"
        )


class RemoveConstraintOnline(RemoveConstraint):
    """Drop a partial unique constraint `CONCURRENTLY` on PostgreSQL; a plain `RemoveConstraint` elsewhere."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor != "postgresql":
            return super().database_forwards(app_label, schema_editor, from_state, to_state)
        schema_editor.execute(
            f"DROP INDEX CONCURRENTLY IF EXISTS {schema_editor.quote_name(self.name)}"
        )

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        model = to_state.apps.get_model(app_label, self.model_name)
        if schema_editor.connection.vendor != "postgresql":
            return super().database_backwards(app_label, schema_editor, from_state, to_state)
        constraint = to_state.models[app_label, self.model_name_lower].get_constraint_by_name(
            self.name
        )
        schema_editor.execute(_concurrently(str(constraint.create_sql(model, schema_editor))))
