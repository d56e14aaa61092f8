"""An incident belongs to one workspace (issue 36): a cause seen in two workspaces is two incidents.

`workspace_id` is added nullable (security incidents have none), then filled from the members: an
incident whose members are all of one workspace takes it; one whose members span workspaces is split, one
incident per workspace with that workspace's members and a copy of the timeline (its notifications stay
with the first, the lowest workspace). One live incident per cause becomes one per cause and workspace.

Not atomic: the unique and plain indexes are built CONCURRENTLY on PostgreSQL (`outbox.online_schema`);
the fill runs in its own transaction before them.
"""

from django.db import migrations, models, transaction

from outbox.online_schema import AddConstraintOnline, AddIndexOnline, RemoveConstraintOnline

COPIED = [
    "cause",
    "kind",
    "severity",
    "state",
    "title",
    "destination",
    "failure_class",
    "reason_code",
    "workflow",
    "step",
    "rule_version",
    "high_impact",
    "owner_id",
    "sla_due_at",
    "opened_at",
    "last_seen_at",
    "acknowledged_at",
    "acknowledged_by_id",
    "resolved_at",
    "resolved_by_id",
    "pages_sent",
    "next_escalation_at",
]


def _split(incident, workspaces, Incident, IncidentMember, IncidentEvent) -> None:
    first, *others = workspaces
    Incident.objects.filter(pk=incident.pk).update(workspace_id=first)
    for workspace_id in others:
        copy = Incident.objects.create(
            workspace_id=workspace_id, **{name: getattr(incident, name) for name in COPIED}
        )
        members = IncidentMember.objects.filter(incident=incident, workspace_id=workspace_id)
        members.update(incident=copy)
        for event in IncidentEvent.objects.filter(incident=incident).order_by("pk"):
            event.pk = None
            event.incident = copy
            event.save()
        Incident.objects.filter(pk=copy.pk).update(
            member_count=IncidentMember.objects.filter(incident=copy).count(),
            settled_count=IncidentMember.objects.filter(
                incident=copy, settled_at__isnull=False
            ).count(),
        )
    Incident.objects.filter(pk=incident.pk).update(
        member_count=IncidentMember.objects.filter(incident=incident).count(),
        settled_count=IncidentMember.objects.filter(
            incident=incident, settled_at__isnull=False
        ).count(),
    )


def fill_workspaces(apps, schema_editor) -> None:
    Incident = apps.get_model("reconciliation", "Incident")
    IncidentMember = apps.get_model("reconciliation", "IncidentMember")
    IncidentEvent = apps.get_model("reconciliation", "IncidentEvent")
    with transaction.atomic(using=schema_editor.connection.alias):
        for incident in Incident.objects.filter(workspace_id__isnull=True).order_by("pk"):
            workspaces = sorted(
                set(
                    IncidentMember.objects.filter(incident=incident, workspace_id__isnull=False)
                    .values_list("workspace_id", flat=True)
                    .order_by()
                )
            )
            if workspaces:
                _split(incident, workspaces, Incident, IncidentMember, IncidentEvent)


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("reconciliation", "0008_security_event_password_spraying")]

    operations = [
        migrations.AddField(
            model_name="incident",
            name="workspace_id",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        RemoveConstraintOnline(model_name="incident", name="incident_one_live_per_cause"),
        migrations.RunPython(fill_workspaces, migrations.RunPython.noop, elidable=True),
        AddConstraintOnline(
            model_name="incident",
            constraint=models.UniqueConstraint(
                condition=models.Q(
                    models.Q(("state", "resolved"), _negated=True), ("workspace_id__isnull", False)
                ),
                fields=("cause", "workspace_id"),
                name="incident_one_live_per_cause_ws",
            ),
        ),
        AddConstraintOnline(
            model_name="incident",
            constraint=models.UniqueConstraint(
                condition=models.Q(
                    models.Q(("state", "resolved"), _negated=True), ("workspace_id__isnull", True)
                ),
                fields=("cause",),
                name="incident_one_live_per_cause_unscoped",
            ),
        ),
        AddIndexOnline(
            model_name="incident",
            index=models.Index(fields=["workspace_id", "state"], name="incident_workspace_idx"),
        ),
    ]
