"""A person's moves on an incident: acknowledge (the escalation stops, PagerDuty is told) and resolve."""

from django.conf import settings
from django.db import transaction

from incidents.models import Incident, IncidentState, NotificationEvent
from incidents.services.incidents import incident_event, incident_resolve
from incidents.services.notifications import incident_notify
from lib.databases import DB
from outbox.clock import DbNow
from reconciliation.errors import ReconciliationError


class InvalidIncidentTransition(ReconciliationError):
    """The incident is not in a state that allows this move (already acknowledged, resolved...)."""


def incident_acknowledge(*, incident_id: int, actor, note: str = "") -> Incident:
    """Acknowledge: no more escalation pages until the acknowledgement lapses (ALERT_ACK_LAPSE_SECONDS,
    then the incident pages again if its cause still holds); the channels that were paged are told."""
    with transaction.atomic(using=DB):
        incident = Incident.objects.using(DB).select_for_update(no_key=True).get(pk=incident_id)
        if not incident.can_move_to(IncidentState.ACKNOWLEDGED):
            raise InvalidIncidentTransition(
                f"an incident that is {incident.state} cannot be acknowledged"
            )
        Incident.objects.using(DB).filter(pk=incident.pk).update(
            state=IncidentState.ACKNOWLEDGED,
            acknowledged_at=DbNow(),
            acknowledged_by=actor,
            next_escalation_at=None,
            ack_lapses_at=DbNow(float(settings.ALERT_ACK_LAPSE_SECONDS)),
        )
        incident_event(
            incident,
            "acknowledged",
            actor=actor,
            note=note,
            from_state=incident.state,
            to_state=IncidentState.ACKNOWLEDGED,
        )
    if incident.pages_sent:
        incident_notify(incident, NotificationEvent.ACKNOWLEDGE)
    return Incident.objects.using(DB).get(pk=incident_id)


def incident_resolve_by_person(*, incident_id: int, actor, note: str = "") -> Incident:
    """Resolve by hand: the members are counted as handled and do not open the next incident."""
    incident = Incident.objects.using(DB).get(pk=incident_id)
    if not incident.can_move_to(IncidentState.RESOLVED):
        raise InvalidIncidentTransition(f"an incident that is {incident.state} cannot be resolved")
    if not incident_resolve(incident, actor=actor, note=note or "resolved by a person"):
        raise InvalidIncidentTransition("the incident was resolved meanwhile")
    return Incident.objects.using(DB).get(pk=incident_id)
