"""Health's line of the alert channels (issue 40): a partial index of the product's open alert notifications by
workspace and channel, so that the line, drawn on every health page, reads those few rows rather than every open
handoff of the workspaces; built CONCURRENTLY on PostgreSQL."""

from django.db import migrations, models

from outbox.online_schema import AddIndexOnline


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("outbox", "0034_unacknowledged_index_own_handoffs")]

    operations = [
        AddIndexOnline(
            model_name="handoff",
            index=models.Index(
                condition=models.Q(
                    ("state__in", ["in_flight", "needs_attention", "pending", "uncertain"]),
                    ("workflow", "incident_notifications"),
                ),
                fields=["workspace_id", "destination"],
                name="handoff_open_notifications_idx",
            ),
        ),
    ]
