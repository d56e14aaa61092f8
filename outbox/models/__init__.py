"""The outbox's models: one row per approved action to hand off (`handoffs`), its attempts and history
(`history`), the receiving systems (`destination_configs`), their breakers and limits (`destinations`),
bulk jobs (`bulk`), a destination's holds (`holds`), an operator's hold of one case (`case_holds`), and the
states with every allowed move (`states`).
Every model is imported here, so Django and callers find them in `outbox.models`."""

from outbox.models.archive import ArchivedHandoff
from outbox.models.bulk import BulkJob
from outbox.models.case_holds import CaseHold, CaseHoldQuerySet
from outbox.models.destination_configs import DestinationConfig
from outbox.models.destinations import (
    DestinationEvent,
    DestinationHealth,
    DestinationSlot,
    default_max_concurrency,
    default_max_requests_per_second,
)
from outbox.models.erasures import ERASED, Erasure
from outbox.models.handoffs import Handoff, HandoffQuerySet
from outbox.models.history import Attempt, HandoffEvent
from outbox.models.holds import DestinationHold, DestinationHoldQuerySet, HoldKind
from outbox.models.states import (
    AGE_CHOICES,
    COMPENSATION_TRANSITIONS,
    DESTINATION_TRANSITIONS,
    DISPATCHER_STATES,
    HANDOFF_AGES,
    HANDOFF_TRANSITIONS,
    NEEDS_PERSON_STATES,
    OPEN_STATES,
    SETTLED_STATES,
    UNKNOWN_OUTCOME_CLASSES,
    AttemptOutcome,
    BulkJobState,
    CompensationState,
    DestinationState,
    FailureClass,
    HandoffKind,
    HandoffState,
    PauseReason,
    SlotKind,
)
from outbox.models.status_events import StatusEvent, StatusEventResult
from outbox.models.timeline import DatabaseTimeline

__all__ = [
    "ArchivedHandoff",
    "AGE_CHOICES",
    "COMPENSATION_TRANSITIONS",
    "DESTINATION_TRANSITIONS",
    "DISPATCHER_STATES",
    "HANDOFF_AGES",
    "HANDOFF_TRANSITIONS",
    "NEEDS_PERSON_STATES",
    "OPEN_STATES",
    "SETTLED_STATES",
    "UNKNOWN_OUTCOME_CLASSES",
    "Attempt",
    "AttemptOutcome",
    "BulkJob",
    "BulkJobState",
    "CaseHold",
    "CaseHoldQuerySet",
    "CompensationState",
    "DatabaseTimeline",
    "ERASED",
    "Erasure",
    "DestinationConfig",
    "DestinationEvent",
    "DestinationHealth",
    "DestinationHold",
    "DestinationHoldQuerySet",
    "HoldKind",
    "DestinationSlot",
    "DestinationState",
    "FailureClass",
    "Handoff",
    "HandoffEvent",
    "HandoffKind",
    "HandoffQuerySet",
    "HandoffState",
    "PauseReason",
    "SlotKind",
    "StatusEvent",
    "StatusEventResult",
    "default_max_concurrency",
    "default_max_requests_per_second",
]
