"""The Requests page's order: an index on (workspace, created_at, id), so that a page of a workspace's newest
requests is read from the index, not by sorting them all; built CONCURRENTLY on PostgreSQL while requests
arrive."""

from django.db import migrations, models

from outbox.online_schema import AddIndexOnline


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("approvals", "0015_request_search_text")]

    operations = [
        AddIndexOnline(
            model_name="request",
            index=models.Index(fields=["workspace", "created_at", "id"], name="request_ws_age_idx"),
        ),
    ]
