"""The archive keeps each handoff's search text (issue 39, "Find by what people know"): a nullable column (the
release before archives rows without it) and on PostgreSQL a trigram index on it (pg_trgm, as migration 0024
on the hot table) that serves the console's `LIKE '%…%'`, built CONCURRENTLY while retention writes.

Not atomic: CONCURRENTLY cannot run in a transaction. Rows archived before are found by their key only."""

from django.db import migrations, models, router

TRIGRAM_INDEX = "archived_search_trgm_idx"


def _trigram_index(apps, schema_editor, sql: list[str]):
    ArchivedHandoff = apps.get_model("outbox", "ArchivedHandoff")  # noqa: N806
    connection = schema_editor.connection
    if connection.vendor != "postgresql" or not router.allow_migrate_model(
        connection.alias, ArchivedHandoff
    ):
        return
    for statement in sql:
        schema_editor.execute(statement)


def add_trigram_index(apps, schema_editor):
    _trigram_index(
        apps,
        schema_editor,
        [
            "CREATE EXTENSION IF NOT EXISTS pg_trgm",
            f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {TRIGRAM_INDEX} ON outbox_archivedhandoff "
            "USING gin (search_text gin_trgm_ops)",
        ],
    )


def drop_trigram_index(apps, schema_editor):
    _trigram_index(apps, schema_editor, [f"DROP INDEX CONCURRENTLY IF EXISTS {TRIGRAM_INDEX}"])


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("outbox", "0027_system_holds_are_rows")]

    operations = [
        migrations.AddField(
            model_name="archivedhandoff",
            name="search_text",
            field=models.TextField(blank=True, editable=False, null=True),
        ),
        migrations.RunPython(add_trigram_index, drop_trigram_index),
    ]
