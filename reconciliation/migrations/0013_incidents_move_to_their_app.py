"""Incidents, their channels, notifications and replays now live in the `incidents` app (its migration
0001): they leave reconciliation's state. Their tables stay as they are (state only, nothing dropped)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("reconciliation", "0012_notification_handoff_drop_alertrecord"),
        ("incidents", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.RemoveField(
                    model_name="notification",
                    name="channel",
                ),
                migrations.DeleteModel(
                    name="EscalationPolicy",
                ),
                migrations.RemoveField(
                    model_name="incident",
                    name="acknowledged_by",
                ),
                migrations.RemoveField(
                    model_name="incident",
                    name="owner",
                ),
                migrations.RemoveField(
                    model_name="incident",
                    name="resolved_by",
                ),
                migrations.RemoveField(
                    model_name="replay",
                    name="incident",
                ),
                migrations.RemoveField(
                    model_name="notification",
                    name="incident",
                ),
                migrations.RemoveField(
                    model_name="incidentevent",
                    name="incident",
                ),
                migrations.RemoveField(
                    model_name="incidentmember",
                    name="incident",
                ),
                migrations.RemoveField(
                    model_name="incidentevent",
                    name="actor",
                ),
                migrations.RemoveField(
                    model_name="replay",
                    name="actor",
                ),
                migrations.RemoveField(
                    model_name="replay",
                    name="confirmed_by",
                ),
                migrations.RemoveField(
                    model_name="replayitem",
                    name="replay",
                ),
                migrations.DeleteModel(
                    name="AlertChannel",
                ),
                migrations.DeleteModel(
                    name="Notification",
                ),
                migrations.DeleteModel(
                    name="Incident",
                ),
                migrations.DeleteModel(
                    name="IncidentMember",
                ),
                migrations.DeleteModel(
                    name="IncidentEvent",
                ),
                migrations.DeleteModel(
                    name="Replay",
                ),
                migrations.DeleteModel(
                    name="ReplayItem",
                ),
            ],
        ),
    ]
