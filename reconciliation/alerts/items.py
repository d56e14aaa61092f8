"""What an alert says about one handoff or finding: workflow, instance, last successful step, failure
class, affected record, safest next action, link. Everything shown goes through the redaction function."""

from dataclasses import dataclass

from django.conf import settings
from django.urls import reverse

from outbox.models import Handoff
from outbox.redaction import redact_text
from outbox.selectors import last_successful_step
from reconciliation import next_actions
from reconciliation.models import Finding
from reconciliation.selectors.links import findings_url


@dataclass(frozen=True)
class AlertItem:
    workflow: str
    instance: str
    last_successful_step: str
    failure_class: str
    affected_record: str
    next_action: str
    link: str
    detail: str = ""


def absolute(path: str) -> str:
    return f"{settings.CONSOLE_BASE_URL}{path}"


def handoff_link(handoff_id: int) -> str:
    return absolute(reverse("outbox:detail", args=[handoff_id]))


def handoff_item(handoff: Handoff) -> AlertItem:
    failure = handoff.failure_class or "none"
    if handoff.reason_code:
        failure = f"{failure} ({handoff.reason_code})"
    return AlertItem(
        workflow=handoff.workflow,
        instance=handoff.action_key,
        last_successful_step=last_successful_step(handoff),
        failure_class=failure,
        affected_record=f"{handoff.source_ref}, workspace {handoff.workspace_id}",
        next_action=next_actions.for_handoff(handoff),
        link=handoff_link(handoff.pk),
        detail=redact_text(handoff.last_error)[:500],
    )


def finding_item(finding: Finding, handoff: Handoff | None) -> AlertItem:
    if handoff is not None:
        step, record, link = (
            last_successful_step(handoff),
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
        last_successful_step=step,
        failure_class=f"reconciliation: {finding.kind}",
        affected_record=record,
        next_action=finding.next_action,
        link=link,
        detail=redact_text(why),
    )
