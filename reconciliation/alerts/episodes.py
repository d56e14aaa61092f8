"""Finding what to alert on: each alertable episode (a handoff entered needs_attention, a handoff passed
its SLA, a finding opened, a page) recorded once under a unique group key. An episode that persists is
not recorded again; a handoff that fails again later is a new episode."""

from datetime import datetime

from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef

from lib.databases import DB
from outbox.models import OPEN_STATES, Handoff, HandoffState
from reconciliation.alerts.pages import page_episodes, page_record_fields
from reconciliation.models import (
    AlertChannel,
    AlertKind,
    AlertRecord,
    Finding,
    FindingStatus,
    IncidentSeverity,
)


def _claim_episode(**fields) -> bool:
    """Record one episode; False when it was recorded before (by this or a concurrent sweep)."""
    try:
        with transaction.atomic(using=DB):
            AlertRecord.objects.using(DB).create(**fields)
    except IntegrityError:
        return False
    return True


def _record_handoff_episodes(kind: str, handoffs, episode_field: str, *, limit: int) -> int:
    already = AlertRecord.objects.using(DB).filter(
        kind=kind, handoff_id=OuterRef("pk"), episode_at=OuterRef(episode_field)
    )
    candidates = (
        handoffs.filter(~Exists(already))
        .order_by(episode_field, "pk")
        .values_list(
            "pk", episode_field, "action_key", "workflow", "failure_class", "workspace_id"
        )[:limit]
    )
    recorded = 0
    for pk, episode, key, workflow, failure_class, workspace_id in candidates:
        recorded += _claim_episode(
            kind=kind,
            handoff_id=pk,
            episode_at=episode,
            group_key=f"{kind}:{pk}:{episode.isoformat()}",
            action_key=key,
            workflow=workflow,
            failure_class=failure_class,
            workspace_id=workspace_id,
        )
    return recorded


def _record_findings(*, limit: int) -> int:
    already = AlertRecord.objects.using(DB).filter(
        kind=AlertKind.RECONCILIATION, finding_id=OuterRef("pk")
    )
    candidates = (
        Finding.objects.using(DB)
        .filter(status=FindingStatus.OPEN)
        .filter(~Exists(already))
        .order_by("pk")
        .values_list("pk", "action_key", "workflow", "kind", "workspace_id")[:limit]
    )
    recorded = 0
    for pk, key, workflow, kind, workspace_id in candidates:
        recorded += _claim_episode(
            kind=AlertKind.RECONCILIATION,
            finding_id=pk,
            group_key=f"finding:{pk}",
            action_key=key,
            workflow=workflow,
            failure_class=kind,
            workspace_id=workspace_id,
        )
    return recorded


def incident_channels_page() -> bool:
    return (
        AlertChannel.objects.using(DB).filter(enabled=True, severity=IncidentSeverity.PAGE).exists()
    )


def record_episodes(*, now: datetime, limit: int = 500) -> dict[str, int]:
    handoffs = Handoff.objects.using(DB)
    return {
        AlertKind.NEEDS_ATTENTION: _record_handoff_episodes(
            AlertKind.NEEDS_ATTENTION,
            handoffs.filter(state=HandoffState.NEEDS_ATTENTION, attention_since__isnull=False),
            "attention_since",
            limit=limit,
        ),
        AlertKind.SLA_BREACH: _record_handoff_episodes(
            AlertKind.SLA_BREACH,
            handoffs.filter(state__in=OPEN_STATES, sla_due_at__lt=now),
            "sla_due_at",
            limit=limit,
        ),
        AlertKind.RECONCILIATION: _record_findings(limit=limit),
        # Once paging channels are configured, incidents page (one per cause): these pages stop.
        "pages": 0
        if incident_channels_page()
        else sum(
            _claim_episode(**page_record_fields(episode)) for episode in page_episodes(now=now)
        ),
    }
