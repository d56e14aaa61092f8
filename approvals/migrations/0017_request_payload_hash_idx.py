"""A search by payload hash finds the request whose any revision carried it (`approvals/request_search.py`):
an index on (payload_hash, workspace), so that the revisions of a hash are read from it, not by reading
every request; built CONCURRENTLY on PostgreSQL while requests arrive."""

from django.db import migrations, models

from outbox.online_schema import AddIndexOnline


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("approvals", "0016_request_ws_age_idx")]

    operations = [
        AddIndexOnline(
            model_name="request",
            index=models.Index(
                fields=["payload_hash", "workspace"], name="request_payload_hash_idx"
            ),
        ),
    ]
