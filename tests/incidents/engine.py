"""The alert sweep and then the outbox's engine, as the django-q2 schedule and a dispatcher do them one after
the other: the tests' way to send what the sweep queued (the notifications' handoffs) without a dispatcher
process."""

from incidents.channels.delivery import notifications_deliver_now
from incidents.sweep import SweepResult
from incidents.sweep import alerts_send_due as alerts_sweep


def alerts_send_due() -> SweepResult:
    """One sweep, then every due notification delivered by the outbox's engine."""
    result = alerts_sweep()
    notifications_deliver_now()
    return result
