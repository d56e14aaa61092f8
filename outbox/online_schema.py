"""Migration operations that are safe while dispatchers run, on both backends (docs/operations.md, "Upgrades").

PostgreSQL builds an index on a hot table `CONCURRENTLY` (writes go on during the build); Django's
`AddIndexConcurrently` only runs there. SQLite, the embedded default, has one writer and no concurrent
build: there the same operation is a plain `AddIndex`. A migration using it sets `atomic = False`.
"""

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db.migrations.operations import AddIndex


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
