"""django-q2 tasks. Thin: call one service and return a small summary for the task result."""

from reconciliation.errors import RunDeferred
from reconciliation.services import runs


def reconcile() -> dict:
    try:
        run = runs.reconciliation_run_scheduled()
    except RunDeferred as exc:
        return {"run": None, "status": "deferred", "error": str(exc)}
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
