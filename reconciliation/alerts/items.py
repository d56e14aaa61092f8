"""What an alert says about one handoff or finding: workflow, instance, the workflow's last delivered step,
failure class, affected record, safest next action, link. Everything shown goes through the redaction
function."""

from dataclasses import dataclass

from django.conf import settings
from django.urls import reverse

from lib.databases import DB
from outbox.models import Handoff, HandoffKind, HandoffState
from outbox.redaction import redact_text
from reconciliation import next_actions
from reconciliation.models import Finding
from reconciliation.selectors.links import findings_url


@dataclass(frozen=True)
class AlertItem:
    workflow: str
    instance: str
    last_delivered_step: str
    failure_class: str
    affected_record: str
    next_action: str
    link: str
    detail: str = ""


def absolute(path: str) -> str:
    return f"{settings.CONSOLE_BASE_URL}{path}"


def last_delivered_step(handoff: Handoff) -> str:
    """The workflow instance's last step delivered with a validated receipt (`provision_account` when step 3
    fails), not the failing handoff's own progress; "none yet" when no step was delivered."""
    delivered = (
        Handoff.objects.using(DB)
        .filter(
            instance_key=handoff.instance_key,
            kind=HandoffKind.ACTION,
            state=HandoffState.DELIVERED,
        )
        .order_by("-step_index")
        .first()
    )
    if delivered is None:
        return "none yet: no step of this instance has been delivered"
    name = delivered.step or delivered.workflow
    return (
        f"{name} (delivered {delivered.delivered_at:%Y-%m-%d %H:%M} UTC, "
        f"task {delivered.destination_id})"
    )


def handoff_link(handoff_id: int) -> str:
    return absolute(reverse("outbox:detail", args=[handoff_id]))


def handoff_item(handoff: Handoff) -> AlertItem:
    failure = handoff.failure_class or "none"
    if handoff.reason_code:
        failure = f"{failure} ({handoff.reason_code})"
    return AlertItem(
        workflow=handoff.workflow,
        instance=handoff.action_key,
        last_delivered_step=last_delivered_step(handoff),
        failure_class=failure,
        affected_record=f"{handoff.source_ref}, workspace {handoff.workspace_id}",
        next_action=next_actions.for_handoff(handoff),
        link=handoff_link(handoff.pk),
        detail=redact_text(handoff.last_error)[:500],
    )


def finding_item(finding: Finding, handoff: Handoff | None) -> AlertItem:
    if handoff is not None:
        step, record, link = (
            last_delivered_step(handoff),
            f"{handoff.source_ref}, workspace {handoff.workspace_id}",
            handoff_link(handoff.pk),
        )
    else:
        task = finding.receiver_evidence.get("task_id")
        step = f"receiver holds task {task}" if task else "approved at the source; no outbox row"
        request_id = finding.source_evidence.get("request_id")
        record = f"request id {request_id}" if request_id else f"receiver task {task}"
        link = absolute(findings_url(q=finding.action_key))
    why = finding.source_evidence.get("why", "")
    return AlertItem(
        workflow=finding.workflow or "unknown",
        instance=finding.action_key,
        last_delivered_step=step,
        failure_class=f"reconciliation: {finding.kind}",
        affected_record=record,
        next_action=finding.next_action,
        link=link,
        detail=redact_text(why),
    )
