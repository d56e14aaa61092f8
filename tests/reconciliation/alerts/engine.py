"""The alert sweep and then the outbox's engine, as the django-q2 schedule and a dispatcher do them one after
the other: the tests' way to send what the sweep queued (the notifications' handoffs) without a dispatcher
process."""

from reconciliation.alerts import SweepResult
from reconciliation.alerts import alerts_send_due as alerts_sweep
from reconciliation.alerts.channel_delivery import notifications_deliver_now


def alerts_send_due() -> SweepResult:
    """One sweep, then every due notification delivered by the outbox's engine."""
    result = alerts_sweep()
    notifications_deliver_now()
    return result
