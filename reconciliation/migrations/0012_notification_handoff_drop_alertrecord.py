"""Notifications ride the outbox's engine (issue 36): each is delivered as a handoff (`handoff_id`, nullable:
a sweep of the release before writes notifications without one, and sends them itself), and its state is read
from that handoff (`retrying` is new, a choice only).

The retired alert record's table goes: it left Django's state in 0010, whose release reads and writes it no
more, and nothing references it (its foreign key to findings was dropped there too). `IF EXISTS`: a database
created after 0001 was squashed or faked may not have it.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("reconciliation", "0011_replay_outcomes_nothing_to_do"),
    ]

    operations = [
        migrations.AddField(
            model_name="notification",
            name="handoff_id",
            field=models.BigIntegerField(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name="notification",
            name="state",
            field=models.CharField(
                choices=[
                    ("pending", "Pending"),
                    ("retrying", "Retrying (an attempt failed)"),
                    ("sent", "Sent"),
                    ("failed", "Failed (retries exhausted)"),
                    ("dropped", "Withdrawn: the cause had ended before it went out"),
                ],
                default="pending",
                max_length=8,
            ),
        ),
        migrations.RunSQL(
            "DROP TABLE IF EXISTS reconciliation_alertrecord",
            reverse_sql=migrations.RunSQL.noop,
        ),
    ]
