"""Every screen of the console for every object, as each role sees it, rendered with the Django test client:
the requester's and approver's request pages, the operator's handoff list and pages, Health, incidents,
destinations, and support's admin pages. A screen a role may not open (403, 404, a redirect) is skipped:
the oracle checks what is shown, the scope tests check who may see it."""

from django.test import Client
from django.urls import reverse

from approvals.models import Request
from outbox.models import DestinationHealth, Handoff
from reconciliation.models import Incident

ROLE_SCREENS = {
    "requester": ("approvals:mine",),
    "approver": ("approvals:queue",),
    "operator": ("outbox:list", "reconciliation:health", "incidents:list", "destinations:list"),
    "support": ("admin:outbox_handoff_changelist",),
}


def _urls_of_objects(role: str) -> list[str]:
    urls = []
    if role in ("requester", "approver", "operator"):
        urls += [
            reverse("approvals:detail", args=[r.workspace_id, r.number, r.revision])
            for r in Request.objects.only("workspace_id", "number", "revision")
        ]
    if role in ("requester", "operator"):
        urls += [
            reverse("outbox:detail", args=[pk])
            for pk in Handoff.objects.values_list("pk", flat=True)
        ]
    if role == "operator":
        urls += [
            reverse("incidents:detail", args=[pk])
            for pk in Incident.objects.values_list("pk", flat=True)
        ]
        urls += [
            reverse("destinations:detail", args=[name])
            for name in DestinationHealth.objects.values_list("name", flat=True)
        ]
    if role == "support":
        urls += [
            reverse("admin:outbox_handoff_change", args=[pk])
            for pk in Handoff.objects.values_list("pk", flat=True)
        ]
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
