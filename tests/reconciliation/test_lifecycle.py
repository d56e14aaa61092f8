"""Findings and incidents share one lifecycle: open, acknowledged, resolved, by whom and when, each move
on the record's timeline; a resolved one moves no more; only an incident's acknowledgement lapses."""

import pytest

from incidents.models import Incident, IncidentKind, IncidentSeverity
from incidents.services.operator import (
    InvalidIncidentTransition,
    incident_acknowledge,
    incident_resolve_by_person,
)
from reconciliation.errors import InvalidFindingTransition
from reconciliation.models import Finding, LifecycleState
from reconciliation.services.findings import finding_acknowledge, finding_resolve
from tests.factories import FindingFactory, make_user

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


def _incident() -> Incident:
    return Incident.objects.create(
        cause="failures:accounts:permanent",
        workspace_id=7,
        kind=IncidentKind.FAILURES,
        severity=IncidentSeverity.QUEUE,
        title="onboarding failing at receiver",
    )


def _timeline(record) -> list[tuple[str, str, str, str]]:
    rows = record.events.order_by("pk")
    if isinstance(record, Finding):
        return [(e.action, e.from_status, e.to_status, e.actor_label) for e in rows]
    return [(e.action, e.from_state, e.to_state, e.actor_label) for e in rows]


def test_a_finding_and_an_incident_are_acknowledged_and_resolved_the_same_way():
    olga = make_user("olga")
    finding, incident = FindingFactory(), _incident()

    finding_acknowledge(finding_id=finding.pk, actor=olga)
    incident_acknowledge(incident_id=incident.pk, actor=olga)
    finding_resolve(finding_id=finding.pk, actor=olga, note="task re-created")
    incident_resolve_by_person(incident_id=incident.pk, actor=olga, note="task re-created")

    finding.refresh_from_db()
    incident.refresh_from_db()
    for record in (finding, incident):
        assert record.lifecycle_state == LifecycleState.RESOLVED
        assert (record.acknowledged_by, record.resolved_by) == (olga, olga)
        assert record.acknowledged_at <= record.resolved_at
        assert not record.is_live
        assert not type(record).objects.live().filter(pk=record.pk).exists()
        assert [(a, f, t) for a, f, t, _ in _timeline(record) if a != "opened"] == [
            ("acknowledged", "open", "acknowledged"),
            ("resolved", "acknowledged", "resolved"),
        ]
    with pytest.raises(InvalidFindingTransition):
        finding_resolve(finding_id=finding.pk, actor=olga, note="again")
    with pytest.raises(InvalidIncidentTransition):
        incident_resolve_by_person(incident_id=incident.pk, actor=olga)


def test_only_an_incidents_acknowledgement_lapses_back_to_open():
    olga = make_user("olga")
    finding, incident = FindingFactory(), _incident()
    finding_acknowledge(finding_id=finding.pk, actor=olga)
    incident_acknowledge(incident_id=incident.pk, actor=olga)
    finding.refresh_from_db()
    incident.refresh_from_db()

    assert not finding.can_move_to(LifecycleState.OPEN)
    assert incident.can_move_to(LifecycleState.OPEN)
    for record in (finding, incident):
        assert record.is_live and not record.is_open
        assert record.can_move_to(LifecycleState.RESOLVED)
        assert not record.can_move_to(LifecycleState.ACKNOWLEDGED)
