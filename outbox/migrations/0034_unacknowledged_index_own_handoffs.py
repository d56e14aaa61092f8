"""The health page's count of unacknowledged failures (issue 40): `handoff_unacknowledged_idx` rebuilt with the
workspaces'-own condition (NOT workflow = 'incident_notifications') that the page's query carries, so that the
count and the oldest are read from the index alone again rather than from every row of a workspace's backlog.

Not atomic: dropped and built CONCURRENTLY on PostgreSQL (dispatchers keep writing meanwhile); until the new one
is built the count reads the state indexes, as it did before.
"""

from django.db import migrations, models

from outbox.online_schema import AddIndexOnline, RemoveIndexOnline


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("outbox", "0033_handoff_needs_person_index")]

    operations = [
        RemoveIndexOnline(model_name="handoff", name="handoff_unacknowledged_idx"),
        AddIndexOnline(
            model_name="handoff",
            index=models.Index(
                condition=models.Q(
                    ("acknowledged_at__isnull", True),
                    ("state", "needs_attention"),
                    models.Q(("workflow", "incident_notifications"), _negated=True),
                ),
                fields=["workspace_id", "attention_since"],
                name="handoff_unacknowledged_idx",
            ),
        ),
    ]
