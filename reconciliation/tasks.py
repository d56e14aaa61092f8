"""django-q2 tasks. Thin: call one service and return a small summary for the task result."""

from reconciliation import alerts
from reconciliation.alerts.replay_preview import replay_preview_run
from reconciliation.alerts.replay_run import replay_run as replay_items_run
from reconciliation.services import runs


def reconcile() -> dict:
    run = runs.reconciliation_run(trigger="schedule")
    return {
        "run": run.pk,
        "status": run.status,
        "keys_compared": run.keys_compared,
        "findings": run.findings_by_kind,
        "error": run.error,
    }


def reconcile_queued(run_id: int) -> dict:
    run = runs.reconciliation_run_queued(run_id=run_id)
    return {
        "run": run.pk,
        "status": run.status,
        "workspace": run.workspace_id,
        "findings": run.findings_by_kind,
    }


def alerts_send_due() -> dict:
    return alerts.alerts_send_due().incidents


def replay_preview(replay_id: int) -> dict:
    replay = replay_preview_run(replay_id=replay_id)
    return {"replay": replay.pk, "state": replay.state, "verdicts": replay.verdicts}


def replay_run(replay_id: int) -> dict:
    replay = replay_items_run(replay_id=replay_id)
    return {"replay": replay.pk, "state": replay.state, "outcomes": replay.outcomes}
