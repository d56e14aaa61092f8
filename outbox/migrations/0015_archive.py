"""Retention: the archive of settled handoffs, and the hot table's index that finds them (docs/operations.md,
"Retention" and "Upgrades").

Not atomic: the index on `outbox_handoff` is built CONCURRENTLY on PostgreSQL (dispatchers keep writing during
the build), which cannot run inside a transaction; so is the index of status events by handoff, which
retention deletes with their handoff (PostgreSQL checks that foreign key on every handoff deleted). The archive table is new and empty, so its indexes and
unique constraint are created with it.
"""

import django.db.models.functions.datetime
from django.db import migrations, models

from outbox.online_schema import AddIndexOnline


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("outbox", "0014_destination_hold_since")]

    operations = [
        migrations.CreateModel(
            name="ArchivedHandoff",
            fields=[
                ("handoff_id", models.BigIntegerField(primary_key=True, serialize=False)),
                ("workspace_id", models.PositiveIntegerField()),
                ("action_key", models.CharField(max_length=200)),
                ("instance_key", models.CharField(blank=True, max_length=200)),
                ("step", models.CharField(blank=True, max_length=60)),
                ("workflow", models.CharField(max_length=40)),
                ("source_ref", models.CharField(max_length=120)),
                ("source_id", models.PositiveBigIntegerField()),
                ("rule_version", models.CharField(blank=True, max_length=40)),
                ("destination", models.CharField(max_length=40)),
                ("final_state", models.CharField(max_length=20)),
                ("task_id", models.CharField(blank=True, max_length=120)),
                ("receipt", models.JSONField(blank=True, default=dict)),
                ("payload_hash", models.CharField(max_length=64)),
                ("work_status", models.CharField(blank=True, max_length=16)),
                ("attempts", models.PositiveIntegerField(default=0)),
                ("created_at", models.DateTimeField()),
                (
                    "settled_at",
                    models.DateTimeField(help_text="The handoff's last change (its updated_at)."),
                ),
                ("delivered_at", models.DateTimeField(blank=True, null=True)),
                (
                    "archived_at",
                    models.DateTimeField(db_default=django.db.models.functions.datetime.Now()),
                ),
                ("history", models.JSONField(blank=True, default=dict)),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(
                        fields=("action_key",), name="archived_handoff_unique_key"
                    )
                ],
                "indexes": [
                    models.Index(
                        fields=["workspace_id", "action_key"],
                        name="archived_handoff_ws_key_idx",
                        opclasses=["int4_ops", "varchar_pattern_ops"],
                    ),
                    models.Index(fields=["source_id"], name="archived_handoff_source_idx"),
                    models.Index(
                        fields=["workspace_id", "archived_at", "handoff_id"],
                        name="archived_handoff_ws_time_idx",
                    ),
                ],
            },
        ),
        AddIndexOnline(
            model_name="handoff",
            index=models.Index(
                condition=models.Q(("state__in", ("cancelled", "delivered", "superseded"))),
                fields=["updated_at", "id"],
                name="handoff_settled_idx",
            ),
        ),
        AddIndexOnline(
            model_name="statusevent",
            index=models.Index(
                condition=models.Q(("handoff__isnull", False)),
                fields=["handoff"],
                name="status_event_handoff_idx",
            ),
        ),
    ]
