"""{% workflow_mode workflow workspace_id %}: the delivery mode (observe / limited / live) of a workflow
in a workspace, for every screen where it matters."""

from urllib.parse import urlencode

from django import template
from django.urls import reverse

from approvals.models import Mode, WorkflowMode
from console.claims import Claim, mode_claim

register = template.Library()


@register.inclusion_tag("approvals/_mode_badge.html")
def workflow_mode(workflow: str, workspace_id: int) -> dict:
    """`mode` is the workflow's mode; `sends` says whether approved handoffs of this workspace are sent
    (limited mode sends only for its allowed workspaces). The badge links to the workflow's observation page
    (`/observation/?workflow=…&workspace=…`: its observed rule versions in this workspace, their agreement with
    the current process and its mode), so every screen that names a workflow leads there. The mode and, in
    limited mode, whether this workspace sends are claims (`workflow.mode`, `workflow.sends_here`)."""
    mode, sends = WorkflowMode.objects.effective(workflow, workspace_id)
    return {
        "mode": mode,
        "mode_claim": mode_claim(workflow, mode),
        "sends_claim": Claim(
            "workflow.sends_here",
            f"workflow:{workflow}|ws:{workspace_id}",
            "yes" if sends else "no",
        ),
        "limited": mode == Mode.LIMITED,
        "sends": sends,
        "workflow": workflow,
        "workspace_id": workspace_id,
        "observation_url": reverse("observation:index")
        + "?"
        + urlencode({"workflow": workflow, "workspace": workspace_id}),
    }
