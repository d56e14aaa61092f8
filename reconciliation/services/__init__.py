"""Reconciliation's writes, by sub-domain: runs (`runs`), the one-key check (`key_check`), findings
(`findings`), manual repairs (`repairs`), the work read back (`work_status`), and asking the
receiver under its limits (`lookups`). What one key's evidence means is `reconciliation.classification`.

The public services are re-exported here, so `from reconciliation import services` keeps working.
"""

from reconciliation.services.findings import finding_acknowledge, finding_resolve
from reconciliation.services.key_check import KeyCheck, handoff_reconcile_now
from reconciliation.services.repairs import manual_repair_record
from reconciliation.services.runs import (
    CONSOLE_SYNC_LIMIT,
    RunProgress,
    reconciliation_run,
    reconciliation_run_queued,
    reconciliation_start_for_workspace,
)

__all__ = [
    "CONSOLE_SYNC_LIMIT",
    "KeyCheck",
    "RunProgress",
    "finding_acknowledge",
    "finding_resolve",
    "handoff_reconcile_now",
    "manual_repair_record",
    "reconciliation_run",
    "reconciliation_run_queued",
    "reconciliation_start_for_workspace",
]
