"""Replays previewed item by item (docs/incidents.md): two new tables, nothing on a hot table."""

import django.db.models.deletion
import django.db.models.functions.datetime
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("reconciliation", "0005_incidents"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="Replay",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("workspace_ids", models.JSONField(default=list)),
                ("description", models.CharField(blank=True, max_length=300)),
                (
                    "state",
                    models.CharField(
                        choices=[
                            ("previewing", "Asking the destinations"),
                            ("previewed", "Previewed: waiting for confirmation"),
                            ("running", "Running"),
                            ("done", "Done"),
                        ],
                        default="previewing",
                        max_length=12,
                    ),
                ),
                ("total", models.PositiveIntegerField(default=0)),
                ("previewed", models.PositiveIntegerField(db_default=0, default=0)),
                ("applied", models.PositiveIntegerField(db_default=0, default=0)),
                (
                    "verdicts",
                    models.JSONField(default=dict, help_text="verdict: count, from the preview"),
                ),
                (
                    "outcomes",
                    models.JSONField(default=dict, help_text="outcome: count, from the run"),
                ),
                (
                    "created_at",
                    models.DateTimeField(db_default=django.db.models.functions.datetime.Now()),
                ),
                (
                    "updated_at",
                    models.DateTimeField(db_default=django.db.models.functions.datetime.Now()),
                ),
                ("previewed_at", models.DateTimeField(blank=True, null=True)),
                ("finished_at", models.DateTimeField(blank=True, null=True)),
                (
                    "actor",
                    models.ForeignKey(
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                (
                    "confirmed_by",
                    models.ForeignKey(
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                (
                    "incident",
                    models.ForeignKey(
                        blank=True,
                        help_text="None: the members of a filter of the handoff list.",
                        null=True,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="replays",
                        to="reconciliation.incident",
                    ),
                ),
            ],
        ),
        migrations.CreateModel(
            name="ReplayItem",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("position", models.PositiveIntegerField()),
                ("handoff_id", models.BigIntegerField()),
                ("action_key", models.CharField(max_length=200)),
                ("destination", models.CharField(max_length=40)),
                ("workspace_id", models.PositiveIntegerField()),
                (
                    "verdict",
                    models.CharField(
                        blank=True,
                        choices=[
                            ("present", "already there (will be settled, not sent)"),
                            ("missing", "missing (will be sent)"),
                            ("cannot_ask", "cannot be asked (needs a person)"),
                            ("conflict", "there with another payload (needs a person)"),
                            ("nothing_to_do", "nothing to replay (settled, or on its way)"),
                        ],
                        max_length=16,
                    ),
                ),
                ("task_id", models.CharField(blank=True, max_length=200)),
                ("note", models.CharField(blank=True, max_length=500)),
                (
                    "outcome",
                    models.CharField(
                        blank=True,
                        choices=[
                            ("settled", "settled by lookup, not sent"),
                            ("sent", "sent again with the same key"),
                            ("changed", "the receiver's answer changed since the preview"),
                            ("skipped", "skipped"),
                            ("left", "left for a person"),
                        ],
                        max_length=12,
                    ),
                ),
                ("outcome_note", models.CharField(blank=True, max_length=500)),
                ("state_after", models.CharField(blank=True, max_length=20)),
                (
                    "replay",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="items",
                        to="reconciliation.replay",
                    ),
                ),
            ],
        ),
        migrations.AddIndex(
            model_name="replay",
            index=models.Index(fields=["state", "updated_at"], name="replay_state_idx"),
        ),
        migrations.AddConstraint(
            model_name="replayitem",
            constraint=models.UniqueConstraint(
                fields=("replay", "position"), name="replay_item_position"
            ),
        ),
        migrations.AddConstraint(
            model_name="replayitem",
            constraint=models.UniqueConstraint(
                fields=("replay", "handoff_id"), name="replay_item_handoff"
            ),
        ),
    ]
