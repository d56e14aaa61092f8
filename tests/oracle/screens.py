"""Every screen of the console for every object, as each role sees it, rendered with the Django test client:
Home, the requester's and approver's request pages, the operator's handoff list and pages, archived handoffs,
bulk jobs, Health, findings, reconciliation runs, triggers, observation and each rule version's agreement,
the audit export, incidents and their replays, destinations, the demo mailbox, and support's admin pages
(handoffs, requests and their revisions, triggers, runs, findings, incidents, destinations' configurations).
A screen a role may not open (403, 404, a redirect) is skipped: the oracle checks what is shown, the scope
tests check who may see it."""

from django.test import Client
from django.urls import reverse

from approvals.models import Request, TriggerRecord
from incidents.models import Incident
from incidents.models.replays import Replay
from outbox.models import ArchivedHandoff, BulkJob, DestinationConfig, DestinationHealth, Handoff
from reconciliation.models import Finding, ReconciliationRun

EVERYONE = ("home", "approvals:search")
ROLE_SCREENS = {
    "requester": (*EVERYONE, "approvals:mine"),
    "approver": (*EVERYONE, "approvals:queue"),
    "operator": (
        *EVERYONE,
        "outbox:list",
        "reconciliation:health",
        "reconciliation:findings",
        "reconciliation:runs",
        "incidents:list",
        "destinations:list",
        "intake:triggers",
        "observation:index",
        "audit:export",
        "delivery:mailbox",
    ),
    "support": (
        "admin:outbox_handoff_changelist",
        "admin:approvals_request_changelist",
        "admin:approvals_triggerrecord_changelist",
        "admin:reconciliation_reconciliationrun_changelist",
        "admin:reconciliation_finding_changelist",
        "admin:incidents_incident_changelist",
        "admin:outbox_destinationconfig_changelist",
    ),
}
# Each kind of object's page, by role, and the rows it is shown for.
OBJECT_SCREENS = [
    (("requester", "approver", "operator"), "approvals:detail", Request, "revision"),
    (("requester", "operator"), "outbox:detail", Handoff, "pk"),
    (("requester", "operator"), "outbox:archived", ArchivedHandoff, "pk"),
    (("operator",), "outbox:bulk_job", BulkJob, "pk"),
    (("operator",), "incidents:detail", Incident, "pk"),
    (("operator",), "incidents:replay", Replay, "pk"),
    (("operator",), "reconciliation:run", ReconciliationRun, "pk"),
    (("operator",), "intake:trigger_detail", TriggerRecord, "pk"),
    (("operator",), "destinations:detail", DestinationHealth, "name"),
    (("operator",), "observation:agreement", Handoff, "rule_version"),
    (("support",), "admin:outbox_handoff_change", Handoff, "pk"),
    (("support",), "admin:approvals_request_change", Request, "pk"),
    (("support",), "admin:reconciliation_finding_change", Finding, "pk"),
    (("support",), "admin:incidents_incident_change", Incident, "pk"),
    (("support",), "admin:outbox_destinationconfig_change", DestinationConfig, "pk"),
]


def _urls_of_objects(role: str) -> list[str]:
    urls = []
    for roles, name, model, field in OBJECT_SCREENS:
        if role not in roles:
            continue
        if name == "approvals:detail":
            rows = model.objects.values_list("workspace_id", "number", "revision")
            urls += [reverse(name, args=list(row)) for row in rows]
        elif name == "observation:agreement":
            rows = model.objects.filter(state="observed").values_list(
                "workspace_id", "rule_version"
            )
            urls += [reverse(name, args=list(row)) for row in sorted(set(rows))]
        else:
            urls += [reverse(name, args=[v]) for v in model.objects.values_list(field, flat=True)]
    return urls


def render_every_screen(users: dict) -> dict[str, str]:
    """{"<role> <url>": html} for each role in `users` ({role: user}) and every screen it may open."""
    pages = {}
    for role, user in users.items():
        client = Client()
        client.force_login(user)
        urls = [reverse(name) for name in ROLE_SCREENS.get(role, ())] + _urls_of_objects(role)
        for url in urls:
            response = client.get(url)
            if response.status_code == 200:
                pages[f"{role} {url}"] = response.content.decode()
    return pages
