"""Wake-ups for the dispatcher: hints that may be lost or doubled. The outbox row is the truth;
the periodic sweep finds whatever a lost wake-up missed."""

import logging

from django.conf import settings
from django.db import transaction

log = logging.getLogger(__name__)


def _enqueue_dispatch_not_rollback_safe() -> None:
    from django_q.tasks import async_task

    try:
        async_task("outbox.tasks.dispatch_due", q_options={"task_name": "dispatch_due"})
    except Exception:  # noqa: BLE001 - a lost hint is harmless; the sweep delivers the row anyway.
        log.warning("dispatcher wake-up could not be queued; the sweep will pick the handoff up", exc_info=True)


def wake_dispatcher_on_commit(using: str = "default") -> None:
    if settings.HANDOFF_WAKE_ON_COMMIT:
        transaction.on_commit(_enqueue_dispatch_not_rollback_safe, using=using)
