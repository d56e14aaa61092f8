"""Incidents are the one way a person is told (issue 36): the per-handoff alert record is retired, and an
incident waits the delay of its severity before telling anyone (`notify_after`), keeps what its cause was
(`cause_since`, `evidence_first`, `evidence_last`) and pages again when an acknowledgement lapses
(`ack_lapses_at`). Every new column is nullable or has a database default: running sweeps keep working.

The alert record leaves Django's state only: its table (`reconciliation_alertrecord`) stays, unread, so that
a release still running during the upgrade does not fail; a later release drops it. Its foreign key to
findings is dropped now, so that nothing of the retired table holds findings (a flush, a purge) meanwhile.
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("reconciliation", "0009_incident_workspace"),
    ]

    operations = [
        migrations.AddField(
            model_name="incident",
            name="ack_lapses_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="incident",
            name="cause_since",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="incident",
            name="evidence_first",
            field=models.TextField(blank=True, db_default="", default=""),
        ),
        migrations.AddField(
            model_name="incident",
            name="evidence_last",
            field=models.TextField(blank=True, db_default="", default=""),
        ),
        migrations.AddField(
            model_name="incident",
            name="notify_after",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name="incident",
            name="kind",
            field=models.CharField(
                choices=[
                    ("destination", "Destination paused"),
                    ("failures", "Handoffs failing for one cause"),
                    ("findings", "Reconciliation findings"),
                    ("security", "Security events"),
                    ("rejected_triggers", "Triggers rejected at intake"),
                    ("backlog", "A destination's queue growing while nothing fails"),
                ],
                max_length=20,
            ),
        ),
        migrations.AlterField(
            model_name="notification",
            name="state",
            field=models.CharField(
                choices=[
                    ("pending", "Pending"),
                    ("sent", "Sent"),
                    ("failed", "Failed (retries exhausted)"),
                    ("dropped", "Withdrawn: the cause had ended before it went out"),
                ],
                default="pending",
                max_length=8,
            ),
        ),
        migrations.AlterField(
            model_name="alertrecord",
            name="finding",
            field=models.ForeignKey(
                blank=True,
                null=True,
                db_constraint=False,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="+",
                to="reconciliation.finding",
            ),
        ),
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="AlertRecord")],
            database_operations=[],
        ),
    ]
