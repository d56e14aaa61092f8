"""Reads of incidents for the console and Health, scoped to the viewer's workspaces: an incident is of one
workspace and visible to its operators (holders of `SECURITY_INCIDENTS_PERMISSION` also see incidents of no
workspace: security events; the fallback on-call sees the incidents they own), and only the members in view
are listed or counted."""

from collections.abc import Iterable

from django.db.models import Count, Q, QuerySet

from incidents.models import (
    SECURITY_INCIDENTS_PERMISSION,
    Incident,
    IncidentEvent,
    IncidentKind,
    IncidentMember,
    Notification,
)
from incidents.text import incident_summary
from lib.databases import DB

MEMBERS_PAGE = 100


def sees_security_incidents(user) -> bool:
    """Whether `user` sees the incidents of no workspace (security events): the named permission, held
    directly or through a group; being staff is not enough."""
    return user.has_perm(SECURITY_INCIDENTS_PERMISSION)


def incidents_for(
    workspace_ids: Iterable[int], *, security: bool = False, live_only: bool = True, owner_id=None
) -> QuerySet[Incident]:
    rows = Incident.objects.using(DB).visible_to(
        workspace_ids, include_unscoped=security, owner_id=owner_id
    )
    if live_only:
        rows = rows.live()
    return rows.select_related("owner").order_by("-opened_at", "-pk")


def owns_incidents(user_id: int) -> bool:
    """True for a fallback on-call who owns an incident (of a workspace they are no operator of)."""
    return Incident.objects.using(DB).filter(owner_id=user_id).exists()


def incident_visible(
    workspace_ids: Iterable[int], pk: int, *, security: bool = False, owner_id=None
):
    rows = incidents_for(workspace_ids, security=security, live_only=False, owner_id=owner_id)
    return rows.filter(pk=pk).first()


def _members_in_view(incident: Incident, workspace_ids: list[int], security: bool):
    """The members the viewer sees, and their workspaces as a claim's subject names them (`ws:7,8`, `none`
    for members of no workspace, which holders of the security permission see)."""
    members = IncidentMember.objects.using(DB).filter(incident=incident)
    if incident.workspace_id is not None and incident.workspace_id not in workspace_ids:
        # Its fallback owner, who is no member of its workspace: the members are theirs to act on.
        return members.filter(workspace_id=incident.workspace_id), [incident.workspace_id]
    ids = sorted(workspace_ids)
    if security:
        in_view = Q(workspace_id__in=ids) | Q(workspace_id__isnull=True)
        return members.filter(in_view), [*ids, "none"]
    return members.filter(workspace_id__in=ids), ids


def incident_detail_for(
    incident: Incident, workspace_ids: list[int], *, security: bool, after: int = 0
) -> dict:
    """What the incident's page shows: the summary (the viewer's members only when they see one
    workspace), the members in view (keyset by id), the timeline and the notifications."""
    members, in_view = _members_in_view(incident, workspace_ids, security)
    page = list(members.filter(pk__gt=after).order_by("pk")[: MEMBERS_PAGE + 1])
    counts = members.aggregate(
        n=Count("id"), settled=Count("id", filter=Q(settled_at__isnull=False))
    )
    return {
        "incident": incident,
        "summary": incident_summary(incident, workspace_id=incident.workspace_id),
        "members": page[:MEMBERS_PAGE],
        "next_after": page[MEMBERS_PAGE - 1].pk if len(page) > MEMBERS_PAGE else None,
        "member_total": counts["n"],
        "member_settled": counts["settled"],
        "members_subject": f"{incident.pk}|ws:{','.join(map(str, in_view))}",
        "events": IncidentEvent.objects.using(DB)
        .filter(incident=incident)
        .select_related("actor")
        .order_by("at", "pk"),
        "notifications": Notification.objects.using(DB)
        .with_withdrawal()
        .filter(incident=incident)
        .select_related("channel")
        .order_by("number", "pk"),
    }


def incident_health(workspace_ids: Iterable[int]) -> dict:
    """The Health page's incident figures: live incidents by severity, and rejected triggers with their owner
    and SLA (the notifications are counted per channel: `incidents.selectors.channels`)."""
    live = incidents_for(workspace_ids).order_by()
    by_severity = dict(live.values_list("severity").annotate(n=Count("id")))
    rejected = list(incidents_for(workspace_ids).filter(kind=IncidentKind.REJECTED_TRIGGERS)[:20])
    return {
        "incidents_paging": by_severity.get("page", 0),
        "incidents_queued": by_severity.get("queue", 0),
        "rejected_trigger_incidents": rejected,
    }
