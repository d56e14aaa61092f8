"""A workflow step's business times and ordering key (issue 39, "Business deadlines", "Order per business
entity"): columns nullable or with a database default (the release before inserts rows without them), and
the deadline sweep's and the ordering check's partial indexes, built CONCURRENTLY on PostgreSQL."""

from django.db import migrations, models

from outbox.online_schema import AddIndexOnline


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("outbox", "0028_archived_search_text")]

    operations = [
        migrations.AddField(
            model_name="handoff",
            name="not_before",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="handoff",
            name="finish_by",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="handoff",
            name="order_key",
            field=models.CharField(blank=True, db_default="", default="", max_length=200),
        ),
        migrations.AddField(
            model_name="handoff",
            name="order_position",
            field=models.BigIntegerField(blank=True, null=True),
        ),
        AddIndexOnline(
            model_name="handoff",
            index=models.Index(
                condition=models.Q(
                    ("state__in", ["in_flight", "needs_attention", "pending", "uncertain"]),
                    models.Q(("order_key", ""), _negated=True),
                ),
                fields=["destination", "order_key", "order_position"],
                name="handoff_order_idx",
            ),
        ),
        AddIndexOnline(
            model_name="handoff",
            index=models.Index(
                condition=models.Q(("finish_by__isnull", False), ("state", "pending")),
                fields=["finish_by"],
                name="handoff_deadline_idx",
            ),
        ),
    ]
