"""Every hold of a destination is a row (issue 36): the breaker's pause, a credential hold, a Retry-After hold
and an unservable hold join the operators' pauses and windows as `DestinationHold` rows, the breaker's ending
when a probe succeeds (`until_probe`). The holds in force are copied into rows.

Release one of two (docs/operations.md, "Rolling deploys"): the columns the rows replace (`hold_*`,
`window_*` of `outbox_destinationhealth`) leave the model but stay in the table, since a dispatcher of the
release before reads and writes them while both run; `hold_reason` gets a database default first so that
this release's inserts, which leave it out, succeed. The next release drops them."""

from django.db import migrations, models

REMOVED = [
    "hold_until",
    "hold_reason",
    "hold_since",
    "window_starts_at",
    "window_ends_at",
    "window_reason",
    "window_set_by",
]


def copy_holds(apps, schema_editor):
    using = schema_editor.connection.alias
    DestinationHealth = apps.get_model("outbox", "DestinationHealth")  # noqa: N806 - a model class
    DestinationHold = apps.get_model("outbox", "DestinationHold")  # noqa: N806
    rows = []
    for health in DestinationHealth.objects.using(using).exclude(hold_until=None):
        rows.append(
            DestinationHold(
                destination=health.name,
                kind="retry_after",
                reason=health.hold_reason or "Retry-After",
                starts_at=health.hold_since or health.hold_until,
                ends_at=health.hold_until,
                set_by="the destination (its answer)",
            )
        )
    for health in DestinationHealth.objects.using(using).filter(state="paused"):
        kind = {"credential": "credential", "unservable": "unservable"}.get(
            health.pause_reason, "breaker"
        )
        rows.append(
            DestinationHold(
                destination=health.name,
                kind=kind,
                reason=(health.last_error or "paused before holds were rows")[:200],
                starts_at=health.paused_at or health.updated_at,
                until_probe=kind != "unservable",
                set_by="a dispatcher" if kind == "unservable" else "the breaker",
            )
        )
    DestinationHold.objects.using(using).bulk_create(rows)


class Migration(migrations.Migration):
    dependencies = [("outbox", "0026_case_holds")]

    operations = [
        migrations.AddField(
            model_name="destinationhold",
            name="until_probe",
            field=models.BooleanField(
                db_default=False,
                default=False,
                help_text="Ends when a probe of the destination succeeds.",
            ),
        ),
        migrations.AlterField(
            model_name="destinationhold",
            name="kind",
            field=models.CharField(
                choices=[
                    ("operator_pause", "Paused by an operator"),
                    ("window", "Maintenance window"),
                    ("breaker", "Breaker pause"),
                    ("credential", "Credential hold"),
                    ("retry_after", "Retry-After hold"),
                    ("unservable", "Cannot be served"),
                ],
                max_length=20,
            ),
        ),
        migrations.AlterField(
            model_name="destinationhold",
            name="ended_at",
            field=models.DateTimeField(
                blank=True,
                help_text="Ended early (by a person, a probe, a dispatcher).",
                null=True,
            ),
        ),
        migrations.AlterField(
            model_name="destinationhealth",
            name="hold_reason",
            field=models.CharField(blank=True, db_default="", default="", max_length=200),
        ),
        migrations.RunPython(copy_holds, migrations.RunPython.noop, elidable=True),
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveField(model_name="destinationhealth", name=name)
                for name in REMOVED
            ],
            database_operations=[],
        ),
    ]
