"""Incidents move out of reconciliation into an app of their own (issue 36): Django's state only.

The tables keep their names (`db_table`); nothing is created, copied or rebuilt, so a dispatcher of the
release before keeps reading and writing the same rows. reconciliation 0013 drops the models from its own
state after this one; the content types (and so the permissions granted on them) follow the models."""

import django.db.models.deletion
import django.db.models.functions.datetime
from django.conf import settings
from django.db import migrations, models

MOVED_MODELS = (
    "incident",
    "incidentmember",
    "incidentevent",
    "alertchannel",
    "escalationpolicy",
    "notification",
    "replay",
    "replayitem",
)


def _content_types_move(apps, schema_editor, *, source: str, target: str):
    ContentType = apps.get_model("contenttypes", "ContentType")
    rows = ContentType.objects.using(schema_editor.connection.alias)
    for model in MOVED_MODELS:
        if not rows.filter(app_label=target, model=model).exists():
            rows.filter(app_label=source, model=model).update(app_label=target)


def content_types_follow(apps, schema_editor):
    _content_types_move(apps, schema_editor, source="reconciliation", target="incidents")


def content_types_return(apps, schema_editor):
    _content_types_move(apps, schema_editor, source="incidents", target="reconciliation")


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        ("contenttypes", "0002_remove_content_type_name"),
        ("reconciliation", "0012_notification_handoff_drop_alertrecord"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.CreateModel(
                    name="EscalationPolicy",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        (
                            "workspace_id",
                            models.PositiveIntegerField(blank=True, null=True, unique=True),
                        ),
                        ("ack_timeout_seconds", models.PositiveIntegerField(default=900)),
                        ("max_pages", models.PositiveSmallIntegerField(default=4)),
                    ],
                    options={
                        "db_table": "reconciliation_escalationpolicy",
                    },
                ),
                migrations.CreateModel(
                    name="AlertChannel",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        (
                            "workspace_id",
                            models.PositiveIntegerField(
                                blank=True,
                                help_text="None: the on-call team of every workspace.",
                                null=True,
                            ),
                        ),
                        ("name", models.CharField(max_length=60)),
                        (
                            "kind",
                            models.CharField(
                                choices=[
                                    ("email", "E-mail"),
                                    ("webhook", "Signed webhook (Standard Webhooks)"),
                                    ("slack", "Slack-compatible incoming webhook"),
                                    ("pagerduty", "PagerDuty Events API v2"),
                                ],
                                max_length=12,
                            ),
                        ),
                        (
                            "target",
                            models.CharField(
                                help_text="An e-mail address or a URL.", max_length=300
                            ),
                        ),
                        ("secret_env", models.CharField(blank=True, max_length=80)),
                        (
                            "severity",
                            models.CharField(
                                choices=[("page", "Page"), ("queue", "Queue with an SLA")],
                                default="page",
                                help_text="Page: pages only; queue: every incident.",
                                max_length=8,
                            ),
                        ),
                        (
                            "level",
                            models.PositiveSmallIntegerField(
                                default=0,
                                help_text="Escalation level: 0 gets the first page, 1 the next, ...",
                            ),
                        ),
                        ("enabled", models.BooleanField(default=True)),
                    ],
                    options={
                        "db_table": "reconciliation_alertchannel",
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("workspace_id", "name"), name="alert_channel_name"
                            )
                        ],
                    },
                ),
                migrations.CreateModel(
                    name="Incident",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("acknowledged_at", models.DateTimeField(blank=True, null=True)),
                        ("resolved_at", models.DateTimeField(blank=True, null=True)),
                        (
                            "cause",
                            models.CharField(
                                help_text="What groups the members: one live per cause.",
                                max_length=200,
                            ),
                        ),
                        ("workspace_id", models.PositiveIntegerField(blank=True, null=True)),
                        (
                            "kind",
                            models.CharField(
                                choices=[
                                    ("destination", "Destination paused"),
                                    ("failures", "Handoffs failing for one cause"),
                                    ("findings", "Reconciliation findings"),
                                    ("security", "Security events"),
                                    ("rejected_triggers", "Triggers rejected at intake"),
                                    (
                                        "backlog",
                                        "A destination's queue growing while nothing fails",
                                    ),
                                ],
                                max_length=20,
                            ),
                        ),
                        (
                            "severity",
                            models.CharField(
                                choices=[("page", "Page"), ("queue", "Queue with an SLA")],
                                max_length=8,
                            ),
                        ),
                        (
                            "state",
                            models.CharField(
                                choices=[
                                    ("open", "Open"),
                                    ("acknowledged", "Acknowledged"),
                                    ("resolved", "Resolved"),
                                ],
                                default="open",
                                max_length=16,
                            ),
                        ),
                        ("title", models.CharField(max_length=300)),
                        ("destination", models.CharField(blank=True, max_length=40)),
                        ("failure_class", models.CharField(blank=True, max_length=40)),
                        ("reason_code", models.CharField(blank=True, max_length=60)),
                        ("workflow", models.CharField(blank=True, max_length=40)),
                        ("step", models.CharField(blank=True, max_length=40)),
                        ("rule_version", models.CharField(blank=True, max_length=40)),
                        ("high_impact", models.BooleanField(db_default=False, default=False)),
                        ("member_count", models.PositiveIntegerField(db_default=0, default=0)),
                        ("settled_count", models.PositiveIntegerField(db_default=0, default=0)),
                        ("sla_due_at", models.DateTimeField(blank=True, null=True)),
                        (
                            "opened_at",
                            models.DateTimeField(
                                db_default=django.db.models.functions.datetime.Now()
                            ),
                        ),
                        (
                            "last_seen_at",
                            models.DateTimeField(
                                db_default=django.db.models.functions.datetime.Now()
                            ),
                        ),
                        ("pages_sent", models.PositiveSmallIntegerField(db_default=0, default=0)),
                        ("next_escalation_at", models.DateTimeField(blank=True, null=True)),
                        ("notify_after", models.DateTimeField(blank=True, null=True)),
                        ("ack_lapses_at", models.DateTimeField(blank=True, null=True)),
                        ("cause_since", models.DateTimeField(blank=True, null=True)),
                        ("evidence_first", models.TextField(blank=True, db_default="", default="")),
                        ("evidence_last", models.TextField(blank=True, db_default="", default="")),
                        (
                            "acknowledged_by",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="+",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                        (
                            "owner",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="+",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                        (
                            "resolved_by",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="+",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                    ],
                    options={
                        "db_table": "reconciliation_incident",
                    },
                ),
                migrations.CreateModel(
                    name="IncidentEvent",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("actor_label", models.CharField(max_length=120)),
                        ("note", models.TextField(blank=True)),
                        ("action", models.CharField(max_length=30)),
                        ("from_state", models.CharField(blank=True, max_length=16)),
                        ("to_state", models.CharField(blank=True, max_length=16)),
                        (
                            "at",
                            models.DateTimeField(
                                db_default=django.db.models.functions.datetime.Now()
                            ),
                        ),
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
                            "incident",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="events",
                                to="incidents.incident",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "reconciliation_incidentevent",
                    },
                ),
                migrations.CreateModel(
                    name="IncidentMember",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        (
                            "member_key",
                            models.CharField(
                                help_text="handoff:<id>, finding:<id>, ...", max_length=60
                            ),
                        ),
                        ("handoff_id", models.BigIntegerField(blank=True, null=True)),
                        ("finding_id", models.BigIntegerField(blank=True, null=True)),
                        ("trigger_id", models.BigIntegerField(blank=True, null=True)),
                        ("security_event_id", models.BigIntegerField(blank=True, null=True)),
                        ("workspace_id", models.PositiveIntegerField(blank=True, null=True)),
                        ("action_key", models.CharField(blank=True, max_length=200)),
                        (
                            "added_at",
                            models.DateTimeField(
                                db_default=django.db.models.functions.datetime.Now()
                            ),
                        ),
                        ("settled_at", models.DateTimeField(blank=True, null=True)),
                        (
                            "incident",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="members",
                                to="incidents.incident",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "reconciliation_incidentmember",
                    },
                ),
                migrations.CreateModel(
                    name="Notification",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("number", models.PositiveSmallIntegerField()),
                        (
                            "event",
                            models.CharField(
                                choices=[
                                    ("trigger", "Page"),
                                    ("acknowledge", "Acknowledged"),
                                    ("resolve", "Resolved"),
                                ],
                                max_length=12,
                            ),
                        ),
                        ("message_id", models.CharField(max_length=80)),
                        (
                            "state",
                            models.CharField(
                                choices=[
                                    ("pending", "Pending"),
                                    ("retrying", "Retrying (an attempt failed)"),
                                    ("sent", "Sent"),
                                    ("failed", "Failed (retries exhausted)"),
                                    (
                                        "dropped",
                                        "Withdrawn: the cause had ended before it went out",
                                    ),
                                ],
                                default="pending",
                                max_length=8,
                            ),
                        ),
                        ("attempts", models.PositiveSmallIntegerField(db_default=0, default=0)),
                        (
                            "created_at",
                            models.DateTimeField(
                                db_default=django.db.models.functions.datetime.Now()
                            ),
                        ),
                        (
                            "next_attempt_at",
                            models.DateTimeField(
                                db_default=django.db.models.functions.datetime.Now()
                            ),
                        ),
                        ("sent_at", models.DateTimeField(blank=True, null=True)),
                        ("last_status", models.CharField(blank=True, max_length=40)),
                        ("last_error", models.TextField(blank=True)),
                        ("handoff_id", models.BigIntegerField(blank=True, null=True)),
                        (
                            "channel",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="+",
                                to="incidents.alertchannel",
                            ),
                        ),
                        (
                            "incident",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="notifications",
                                to="incidents.incident",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "reconciliation_notification",
                    },
                ),
                migrations.CreateModel(
                    name="Replay",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
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
                            models.JSONField(
                                default=dict, help_text="verdict: count, from the preview"
                            ),
                        ),
                        (
                            "outcomes",
                            models.JSONField(
                                default=dict, help_text="outcome: count, from the run"
                            ),
                        ),
                        (
                            "created_at",
                            models.DateTimeField(
                                db_default=django.db.models.functions.datetime.Now()
                            ),
                        ),
                        (
                            "updated_at",
                            models.DateTimeField(
                                db_default=django.db.models.functions.datetime.Now()
                            ),
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
                                to="incidents.incident",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "reconciliation_replay",
                    },
                ),
                migrations.CreateModel(
                    name="ReplayItem",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
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
                                    ("delivered", "already delivered, nothing sent"),
                                    ("nothing", "nothing to do (on its way, or closed)"),
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
                                to="incidents.replay",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "reconciliation_replayitem",
                    },
                ),
                migrations.AddIndex(
                    model_name="incident",
                    index=models.Index(fields=["state", "opened_at"], name="incident_state_idx"),
                ),
                migrations.AddIndex(
                    model_name="incident",
                    index=models.Index(
                        fields=["workspace_id", "state"], name="incident_workspace_idx"
                    ),
                ),
                migrations.AddIndex(
                    model_name="incident",
                    index=models.Index(
                        condition=models.Q(("next_escalation_at__isnull", False)),
                        fields=["next_escalation_at"],
                        name="incident_escalation_idx",
                    ),
                ),
                migrations.AddConstraint(
                    model_name="incident",
                    constraint=models.UniqueConstraint(
                        condition=models.Q(
                            models.Q(("state", "resolved"), _negated=True),
                            ("workspace_id__isnull", False),
                        ),
                        fields=("cause", "workspace_id"),
                        name="incident_one_live_per_cause_ws",
                    ),
                ),
                migrations.AddConstraint(
                    model_name="incident",
                    constraint=models.UniqueConstraint(
                        condition=models.Q(
                            models.Q(("state", "resolved"), _negated=True),
                            ("workspace_id__isnull", True),
                        ),
                        fields=("cause",),
                        name="incident_one_live_per_cause_unscoped",
                    ),
                ),
                migrations.AddIndex(
                    model_name="incidentevent",
                    index=models.Index(fields=["incident", "at"], name="incident_event_idx"),
                ),
                migrations.AddIndex(
                    model_name="incidentmember",
                    index=models.Index(
                        fields=["incident", "settled_at"], name="incident_member_settled_idx"
                    ),
                ),
                migrations.AddIndex(
                    model_name="incidentmember",
                    index=models.Index(
                        fields=["workspace_id", "incident"], name="incident_member_ws_idx"
                    ),
                ),
                migrations.AddConstraint(
                    model_name="incidentmember",
                    constraint=models.UniqueConstraint(
                        fields=("incident", "member_key"), name="incident_member_unique"
                    ),
                ),
                migrations.AddIndex(
                    model_name="notification",
                    index=models.Index(
                        condition=models.Q(("state", "pending")),
                        fields=["next_attempt_at"],
                        name="notification_due_idx",
                    ),
                ),
                migrations.AddIndex(
                    model_name="notification",
                    index=models.Index(
                        fields=["incident", "number"], name="notification_incident_idx"
                    ),
                ),
                migrations.AddConstraint(
                    model_name="notification",
                    constraint=models.UniqueConstraint(
                        fields=("message_id", "channel"), name="notification_unique_per_channel"
                    ),
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
            ],
        ),
        migrations.RunPython(content_types_follow, content_types_return),
    ]
