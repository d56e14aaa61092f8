"""Incidents on /metrics (those not resolved, by kind, severity and state; their notifications by state),
and the process's registry of /metrics: the handoffs' collector (`reconciliation/metrics.py`) and this one."""

from django.db.models import Count
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector, CollectorRegistry

from incidents.models import Incident, Notification
from reconciliation.metrics import HandoffCollector


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
