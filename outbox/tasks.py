"""django-q2 tasks. Thin, and safe to run twice: the outbox rows are the truth, not the messages."""

from outbox import dispatcher


def dispatch_due() -> dict:
    stats = dispatcher.drain()
    return {"claimed": stats.claimed, "delivered": stats.delivered}


def sweep() -> dict:
    stats = dispatcher.sweep()
    return {
        "expired_leases": stats.expired_leases,
        "settled": stats.settled,
        "claimed": stats.claimed,
        "delivered": stats.delivered,
    }
