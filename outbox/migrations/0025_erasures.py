"""Erasure on request (issue 39): the proof of each erasure, and the mark on every handoff and archived
handoff it erased (nullable, no index, no constraint: the release before writes rows without it)."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("outbox", "0024_handoff_search_text"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="Erasure",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("workspace_id", models.PositiveIntegerField()),
                ("erased_at", models.DateTimeField(auto_now_add=True)),
                ("reason", models.TextField()),
                ("counts", models.JSONField(default=dict)),
                (
                    "erased_by",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "permissions": [
                    ("erase_personal_data", "Can erase a data subject's personal data")
                ],
                "indexes": [
                    models.Index(fields=["workspace_id", "erased_at"], name="erasure_ws_time_idx")
                ],
            },
        ),
        migrations.AddField(
            model_name="archivedhandoff",
            name="erasure",
            field=models.ForeignKey(
                blank=True,
                db_constraint=False,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.DO_NOTHING,
                related_name="+",
                to="outbox.erasure",
            ),
        ),
        migrations.AddField(
            model_name="handoff",
            name="erasure",
            field=models.ForeignKey(
                blank=True,
                db_constraint=False,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.DO_NOTHING,
                related_name="+",
                to="outbox.erasure",
            ),
        ),
    ]
