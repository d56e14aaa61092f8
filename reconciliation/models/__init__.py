"""Reconciliation's records: runs and findings (`findings`), the lifecycle findings and incidents share
(`lifecycle`), security events (`security_events`). Incidents are an app of their own (`incidents/`)."""

from reconciliation.models.findings import (
    Finding,
    FindingEvent,
    FindingKind,
    FindingQuerySet,
    FindingStatus,
    ManualRepair,
    ReconciliationRun,
    RunStatus,
)
from reconciliation.models.lifecycle import (
    LIFECYCLE_TRANSITIONS,
    AcknowledgedResolved,
    LifecycleEvent,
    LifecycleQuerySet,
    LifecycleState,
)
from reconciliation.models.metric_totals import ArchivedTotal
from reconciliation.models.security_events import SecurityEvent, SecurityEventKind

__all__ = [
    "AcknowledgedResolved",
    "ArchivedTotal",
    "LIFECYCLE_TRANSITIONS",
    "LifecycleEvent",
    "LifecycleQuerySet",
    "LifecycleState",
    "Finding",
    "FindingEvent",
    "FindingKind",
    "FindingQuerySet",
    "FindingStatus",
    "ManualRepair",
    "ReconciliationRun",
    "RunStatus",
    "SecurityEvent",
    "SecurityEventKind",
]
