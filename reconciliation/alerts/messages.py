"""One message per group of episodes: its subject, body and webhook payload."""

from dataclasses import asdict

from django.conf import settings
from django.utils import timezone

from lib.databases import DB
from outbox.models import Handoff, HandoffState
from reconciliation.alerts.items import AlertItem, absolute, finding_item, handoff_item
from reconciliation.alerts.pages import health_link, render_page
from reconciliation.models import AlertKind, AlertRecord, AlertSeverity
from reconciliation.selectors.links import handoff_list_url

SUBJECTS = {
    AlertKind.NEEDS_ATTENTION: "{n} handoff(s) need attention: {workflow}, {failure}",
    AlertKind.SLA_BREACH: "SLA breached for {n} handoff(s): {workflow}, {failure}",
    AlertKind.RECONCILIATION: "Reconciliation found {n} new problem(s)",
}


def _items_for(records: list[AlertRecord]) -> list[AlertItem]:
    handoff_ids = {r.handoff_id for r in records if r.handoff_id} | {
        r.finding.handoff_id for r in records if r.finding_id and r.finding.handoff_id
    }
    handoffs = Handoff.objects.using(DB).in_bulk(handoff_ids)
    items = []
    for record in records:
        if record.finding_id:
            items.append(finding_item(record.finding, handoffs.get(record.finding.handoff_id)))
        elif record.handoff_id in handoffs:
            items.append(handoff_item(handoffs[record.handoff_id]))
    return items


def render_message(
    kind: str, records: list[AlertRecord], items: list[AlertItem]
) -> tuple[str, str]:
    first = records[0]
    subject = "[handoff] " + SUBJECTS[kind].format(
        n=len(records),
        workflow=first.workflow or "unknown workflow",
        failure=first.failure_class or "no class",
    )
    lines = [subject.removeprefix("[handoff] "), ""]
    shown = items[: settings.ALERT_MAX_ITEMS_PER_MESSAGE]
    for item in shown:
        lines += [
            f"Instance:              {item.instance}",
            f"Workflow:              {item.workflow}",
            f"Failure class:         {item.failure_class}",
            f"Affected record:       {item.affected_record}",
            f"Last delivered step:   {item.last_delivered_step}",
            f"Safest next action:    {item.next_action}",
            f"Open:                  {item.link}",
        ]
        if item.detail:
            lines.append(f"Detail:                {item.detail}")
        lines.append("")
    if len(items) > len(shown):
        lines.append(f"... and {len(items) - len(shown)} more: {_more_link(kind, first)}")
        lines.append("")
    lines.append(
        "This alert is sent once per failure episode; a handoff that stays broken is not alerted again."
    )
    return subject, "\n".join(lines)


def _more_link(kind: str, record: AlertRecord) -> str:
    if kind == AlertKind.RECONCILIATION:
        return health_link()
    return absolute(
        handoff_list_url(state=HandoffState.NEEDS_ATTENTION, failure_class=record.failure_class)
    )


def compose(kind: str, records: list[AlertRecord], message_id: str) -> tuple[str, str, dict]:
    """Subject, body and webhook payload of one message."""
    first = records[0]
    base = {
        "type": f"handoff.alert.{kind}",
        "id": message_id,
        "severity": first.severity,
        "workspace_id": first.workspace_id,
    }
    if first.severity == AlertSeverity.PAGE:
        subject, body, fields = render_page(first, now=timezone.now())
        return subject, body, {**base, "subject": subject, **fields}
    items = _items_for(records)
    subject, body = render_message(kind, records, items)
    return subject, body, {**base, "subject": subject, "items": [asdict(i) for i in items]}
