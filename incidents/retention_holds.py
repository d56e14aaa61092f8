"""What keeps a settled handoff out of the archive on reconciliation's side (the outbox names this rule in
HANDOFF_RETENTION_HOLD_CHECK): a live finding about its key, or its membership of an incident not resolved.
A person is still looking at it, and the finding or incident page links to the handoff's own page."""

from incidents.models import IncidentMember, IncidentState
from lib.databases import ValuesIn
from reconciliation.models import Finding


def held_handoff_ids(handoffs: list[tuple[int, str]]) -> set[int]:
    """Of these (handoff id, action key) pairs, the ids that must stay in the hot tables. Two queries, each
    with its keys or ids as one parameter (`ValuesIn`: a batch asks about a thousand)."""
    ids = [pk for pk, _key in handoffs]
    by_key = {key: pk for pk, key in handoffs}
    held = {
        by_key[key]
        for key in Finding.objects.live()
        .filter(action_key__in=ValuesIn(list(by_key), "text"))
        .values_list("action_key", flat=True)
    }
    held.update(
        IncidentMember.objects.filter(
            handoff_id__in=ValuesIn(ids, "bigint"), settled_at__isnull=True
        )
        .exclude(incident__state=IncidentState.RESOLVED)
        .values_list("handoff_id", flat=True)
    )
    return held
