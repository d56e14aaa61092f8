"""Incidents on /metrics (those not resolved, by kind, severity and state; their notifications by state),
what the incident path alerts on (the handoffs needing a person that no owner holds quietly), and the
process's registry of /metrics: the handoffs' collector (`reconciliation/metrics.py`) and this one."""

from collections import defaultdict

from django.db.models import Count
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector, CollectorRegistry

from incidents.causes import held_by_its_owner
from incidents.models import Incident, Notification
from outbox.models import Handoff, HandoffState
from reconciliation.metrics import HandoffCollector
from reconciliation.selectors.needing_person import needing_person_condition

WF_WS = ["workflow", "workspace"]


def unheld_families() -> tuple[GaugeMetricFamily, GaugeMetricFamily]:
    """The ticket rules' figures, by the failures incident's own rule: a handoff in needs attention whose
    case an operator holds, set less than `ALERT_HOLD_QUIET_HOURS` ago (`held_by_its_owner`), is quiet
    here as it is for the incident and its notifications. Uncertain handoffs and live findings count
    whatever their hold, as their incidents do. One query."""
    attention = GaugeMetricFamily(
        "handoff_needs_attention_unheld",
        "Handoffs in needs attention, by failure class and reason, except those their owner holds "
        "(a case hold set less than ALERT_HOLD_QUIET_HOURS ago): what the failures incident counts.",
        labels=[*WF_WS, "failure_class", "reason_code"],
    )
    person = GaugeMetricFamily(
        "handoff_needing_person_unheld",
        "Handoffs that need a person (handoff_needing_person), except those in needs attention their "
        "owner holds (a case hold set less than ALERT_HOLD_QUIET_HOURS ago).",
        labels=WF_WS,
    )
    per_person: dict[tuple[str, str], int] = defaultdict(int)
    for workflow, ws, state, failure_class, reason, n, held in (
        Handoff.objects.filter(needing_person_condition())
        .order_by()
        .values_list("workflow", "workspace_id", "state", "failure_class", "reason_code")
        .annotate(n=Count("id"), held=Count("id", filter=held_by_its_owner()))
    ):
        labels = [workflow or "", "" if ws is None else str(ws)]
        alerting = n - held if state == HandoffState.NEEDS_ATTENTION else n
        per_person[tuple(labels)] += alerting
        if state == HandoffState.NEEDS_ATTENTION and alerting:
            attention.add_metric([*labels, failure_class, reason], alerting)
    for labels, n in sorted(per_person.items()):
        person.add_metric(list(labels), n)
    return attention, person


class IncidentCollector(Collector):
    def collect(self):
        incidents = GaugeMetricFamily(
            "handoff_incidents",
            "Incidents not resolved, by kind, severity and state.",
            labels=["kind", "severity", "state"],
        )
        for kind, severity, state, n in (
            Incident.objects.live()
            .order_by()
            .values_list("kind", "severity", "state")
            .annotate(n=Count("id"))
        ):
            incidents.add_metric([kind, severity, state], n)
        yield incidents
        notifications = GaugeMetricFamily(
            "handoff_alert_notifications",
            "Incident notifications by state, from their handoffs (failed: retries exhausted, nobody was told).",
            labels=["state"],
        )
        for state, n in (
            Notification.objects.with_delivery()
            .order_by()
            .values_list("delivery_state")
            .annotate(n=Count("id"))
        ):
            notifications.add_metric([state], n)
        yield notifications
        yield from unheld_families()


_registry: CollectorRegistry | None = None


def registry() -> CollectorRegistry:
    """One registry per process holding only these collectors (no process or platform metrics)."""
    global _registry
    if _registry is None:
        reg = CollectorRegistry(auto_describe=False)
        reg.register(HandoffCollector())
        reg.register(IncidentCollector())
        _registry = reg
    return _registry
