"""An operator's hold of one case (issue 39, "Hold one case"): the hold rows, a nullable column on the
handoff naming the hold that covers it (the release before inserts rows without it), and the claim's partial
index rebuilt so that a held row is not in it: the new one is built CONCURRENTLY before the old one is
dropped, so a claim always has an index (the release before's claim, `state = 'pending'` alone, reads the
old one until it is dropped, then the rows of the new one's pending rows through a filter)."""

from django.db import migrations, models

import outbox.clock
from outbox.online_schema import AddIndexOnline, RemoveIndexOnline


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("outbox", "0025_erasures")]

    operations = [
        migrations.CreateModel(
            name="CaseHold",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("workspace_id", models.PositiveIntegerField()),
                ("instance_key", models.CharField(blank=True, max_length=200)),
                ("handoff_id", models.PositiveBigIntegerField()),
                ("action_key", models.CharField(max_length=200)),
                ("reason", models.CharField(max_length=200)),
                (
                    "ends_at",
                    models.DateTimeField(
                        blank=True, help_text="Until; empty: until resumed.", null=True
                    ),
                ),
                ("set_by", models.CharField(max_length=150)),
                ("created_at", outbox.clock.DbClockDateTimeField(auto_now_add=True)),
                ("ended_at", models.DateTimeField(blank=True, null=True)),
                ("ended_by", models.CharField(blank=True, max_length=150)),
                ("end_reason", models.CharField(blank=True, max_length=200)),
            ],
            options={
                "indexes": [
                    models.Index(
                        condition=models.Q(("ended_at__isnull", True)),
                        fields=["ends_at"],
                        name="case_hold_live_idx",
                    ),
                    models.Index(fields=["instance_key"], name="case_hold_instance_idx"),
                ],
            },
        ),
        migrations.AddField(
            model_name="handoff",
            name="case_hold",
            field=models.ForeignKey(
                blank=True,
                db_constraint=False,
                db_index=False,
                null=True,
                on_delete=models.deletion.DO_NOTHING,
                related_name="+",
                to="outbox.casehold",
            ),
        ),
        AddIndexOnline(
            model_name="handoff",
            index=models.Index(
                condition=models.Q(("case_hold__isnull", True), ("state", "pending")),
                fields=["destination", "next_attempt_at", "id"],
                name="handoff_claim_unheld_idx",
            ),
        ),
        RemoveIndexOnline(model_name="handoff", name="handoff_claim_idx"),
        AddIndexOnline(
            model_name="handoff",
            index=models.Index(
                condition=models.Q(("case_hold__isnull", False)),
                fields=["case_hold"],
                name="handoff_case_hold_idx",
            ),
        ),
    ]
