"""The handoffs an erasure marked, found by it: a partial index that holds only erased rows (every foreign key
of the outbox's tables leads an index, tests/outbox/test_index_layout.py), built CONCURRENTLY on PostgreSQL."""

from django.db import migrations, models

from outbox.online_schema import AddIndexOnline


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("outbox", "0029_step_constraints")]

    operations = [
        AddIndexOnline(
            model_name="handoff",
            index=models.Index(
                condition=models.Q(("erasure__isnull", False)),
                fields=["erasure"],
                name="handoff_erasure_idx",
            ),
        ),
    ]
