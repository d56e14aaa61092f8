"""A destination's holds as rows of their own (issue 36, item 1), and the operator's pause or window each
destination row held copied into them; a handoff's attempts that were not its own (item 8). The `window_*` columns of `outbox_destinationhealth` stay, unused: a
dispatcher of the release before still reads them (dropping a column is a later release's migration)."""

from django.db import migrations, models


def copy_windows(apps, schema_editor):
    DestinationHealth = apps.get_model("outbox", "DestinationHealth")  # noqa: N806 - a model class
    DestinationHold = apps.get_model("outbox", "DestinationHold")  # noqa: N806
    rows = DestinationHealth.objects.using(schema_editor.connection.alias).exclude(
        window_starts_at=None
    )
    DestinationHold.objects.using(schema_editor.connection.alias).bulk_create(
        DestinationHold(
            destination=row.name,
            # A pause has no end, or started when it was asked for; a window is scheduled with both ends.
            kind="operator_pause" if row.window_ends_at is None else "window",
            reason=row.window_reason or "set before holds were rows",
            starts_at=row.window_starts_at,
            ends_at=row.window_ends_at,
            set_by=row.window_set_by,
        )
        for row in rows
    )


class Migration(migrations.Migration):
    dependencies = [
        ("outbox", "0022_databasetimeline"),
    ]

    operations = [
        migrations.CreateModel(
            name="DestinationHold",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("destination", models.CharField(max_length=40)),
                (
                    "kind",
                    models.CharField(
                        choices=[
                            ("operator_pause", "Paused by an operator"),
                            ("window", "Maintenance window"),
                        ],
                        max_length=20,
                    ),
                ),
                ("reason", models.CharField(max_length=200)),
                ("starts_at", models.DateTimeField(help_text="From (database clock for a pause).")),
                (
                    "ends_at",
                    models.DateTimeField(
                        blank=True, help_text="Until; empty: until a person ends it.", null=True
                    ),
                ),
                ("set_by", models.CharField(blank=True, max_length=150)),
                (
                    "ended_at",
                    models.DateTimeField(
                        blank=True, help_text="Ended early by a person.", null=True
                    ),
                ),
                ("ended_by", models.CharField(blank=True, max_length=150)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
            ],
            options={
                "indexes": [
                    models.Index(
                        condition=models.Q(("ended_at__isnull", True)),
                        fields=["destination", "starts_at"],
                        name="destination_hold_open_idx",
                    )
                ],
            },
        ),
        migrations.RunPython(copy_windows, migrations.RunPython.noop),
        # A default in the database: the release before inserts handoffs without the column.
        migrations.AddField(
            model_name="handoff",
            name="attempts_not_counted",
            field=models.PositiveIntegerField(db_default=0, default=0),
        ),
    ]
