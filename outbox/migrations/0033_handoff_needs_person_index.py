"""The header's count of a workspace's handoffs needing a person (issue 40): a partial index of the workspaces'
own handoffs in a person's states, so that the count on every page is read from the index alone rather than from
the outbox table; built CONCURRENTLY on PostgreSQL."""

from django.db import migrations, models

from outbox.online_schema import AddIndexOnline


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("outbox", "0032_handoff_search_words")]

    operations = [
        AddIndexOnline(
            model_name="handoff",
            index=models.Index(
                condition=models.Q(
                    ("state__in", ["needs_attention", "uncertain"]),
                    models.Q(("workflow", "incident_notifications"), _negated=True),
                ),
                fields=["workspace_id"],
                name="handoff_needs_person_idx",
            ),
        ),
    ]
