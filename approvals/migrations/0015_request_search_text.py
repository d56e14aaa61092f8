"""The search text of a request revision (issue 39, "Find by what people know"): a nullable column (the
release before inserts rows without it), filled for the rows already there, and on PostgreSQL a trigram index
on it (pg_trgm, as outbox 0024 on the handoffs) that serves the requests list's `LIKE '%…%'`, built
CONCURRENTLY while requests arrive.

Not atomic: CONCURRENTLY cannot run in a transaction, and the fill commits batch by batch. Rows recorded
before this migration are searchable by key, request reference, client name and e-mails (a workflow's own
searchable fields are known from then on)."""

from django.db import migrations, models, router

from outbox.search_text import search_text

BATCH = 2000
TRIGRAM_INDEX = "request_search_trgm_idx"


def fill_search_text(apps, schema_editor):
    Request = apps.get_model("approvals", "Request")  # noqa: N806 - a model class
    alias = schema_editor.connection.alias
    if not router.allow_migrate_model(alias, Request):
        return
    rows = Request.objects.using(alias).filter(search_text=None).order_by("id")
    last = 0
    fields = ("workflow", "workspace_id", "number", "revision", "payload")
    while batch := list(rows.filter(id__gt=last).only(*fields)[:BATCH]):
        for r in batch:
            r.search_text = search_text(
                action_key=f"{r.workflow}:{r.workspace_id}:{r.number}:{r.revision}",
                source_ref=f"request {r.number} revision {r.revision}",
                payload=r.payload,
            )
        Request.objects.using(alias).bulk_update(batch, ["search_text"])
        last = batch[-1].id


def _trigram_index(apps, schema_editor, sql: list[str]):
    Request = apps.get_model("approvals", "Request")  # noqa: N806
    connection = schema_editor.connection
    if connection.vendor != "postgresql" or not router.allow_migrate_model(
        connection.alias, Request
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
            f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {TRIGRAM_INDEX} ON approvals_request "
            "USING gin (search_text gin_trgm_ops)",
        ],
    )


def drop_trigram_index(apps, schema_editor):
    _trigram_index(apps, schema_editor, [f"DROP INDEX CONCURRENTLY IF EXISTS {TRIGRAM_INDEX}"])


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("approvals", "0014_request_erasure")]

    operations = [
        migrations.AddField(
            model_name="request",
            name="search_text",
            field=models.TextField(blank=True, editable=False, null=True),
        ),
        migrations.RunPython(fill_search_text, migrations.RunPython.noop, elidable=True),
        migrations.RunPython(add_trigram_index, drop_trigram_index),
    ]
