"""django-q2 tasks of the source application. Thin: each calls one service."""

from approvals.services.approval_deadlines import approval_deadlines_sweep as _sweep


def approval_deadlines_sweep() -> dict:
    stats = _sweep()
    return {"reminded": stats.reminded, "escalated": stats.escalated, "expired": stats.expired}
