"""Partial indexes for the health dashboard's failure figures (retries exhausted, unacknowledged failures,
time to acknowledgement), so that each reads the few rows it counts instead of a workspace's whole
needs-attention backlog (measured at 10,000,000 handoffs: docs/benchmarks.md).

Not atomic: the indexes on `outbox_handoff` are built CONCURRENTLY on PostgreSQL (dispatchers keep writing
during the build), which cannot run inside a transaction. Each is partial on rows that delivered handoffs
never are, so a delivery writes no entry in them.
"""

from django.db import migrations, models

from outbox.online_schema import AddIndexOnline


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("outbox", "0015_archive")]

    operations = [
        AddIndexOnline(
            model_name="handoff",
            index=models.Index(
                condition=models.Q(("state", "needs_attention")),
                fields=["workspace_id", "reason_code"],
                name="handoff_attention_reason_idx",
            ),
        ),
        AddIndexOnline(
            model_name="handoff",
            index=models.Index(
                condition=models.Q(("acknowledged_at__isnull", True), ("state", "needs_attention")),
                fields=["workspace_id", "attention_since"],
                name="handoff_unacknowledged_idx",
            ),
        ),
        AddIndexOnline(
            model_name="handoff",
            index=models.Index(
                condition=models.Q(("acknowledged_at__isnull", False)),
                fields=["workspace_id", "attention_since"],
                name="handoff_acknowledged_idx",
            ),
        ),
    ]
