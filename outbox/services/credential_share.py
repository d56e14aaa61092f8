"""Refused credentials over a share of a destination's recent calls: the second way a credential hold starts,
beside refusals in a row (`outbox/services/breaker.py`). A receiver that refuses 30 % of calls (one node of
two with a stale secret) never refuses three in a row, yet its refusals persist; one stray 401 in a hundred
calls is not that (issue 36, item 7).

The window slides over the calls the destination's handoffs made (their attempts) in the last
HANDOFF_BREAKER_CREDENTIAL_WINDOW_SECONDS, counted from the end of its last credential hold (the refusals
before a hold do not start the next one). It says "refused" when at least
HANDOFF_BREAKER_CREDENTIAL_MIN_CALLS calls were answered and at least HANDOFF_BREAKER_CREDENTIAL_SHARE of them
were refused (401/403). Read only after an answer that refused credentials: the healthy path reads nothing."""

from django.conf import settings
from django.db.models import Count, Max, Q

from lib.databases import DB
from outbox.clock import db_now_plus
from outbox.models import Attempt, AttemptOutcome, DestinationHold, FailureClass, HoldKind

ANSWERED = [AttemptOutcome.CREATED, AttemptOutcome.DUPLICATE, AttemptOutcome.FAILED]


def credential_share_refused(*, name: str) -> str | None:
    """The share of the destination's recent calls refused for their credentials, in words, when it starts a
    credential hold; None otherwise. Two queries."""
    calls = Attempt.objects.using(DB).filter(
        handoff__destination=name,
        outcome__in=ANSWERED,
        started_at__gte=db_now_plus(-settings.HANDOFF_BREAKER_CREDENTIAL_WINDOW_SECONDS),
    )
    # Both times are the database's: a hold's end and an attempt's start are written by the statement.
    last_hold_end = (
        DestinationHold.objects.using(DB)
        .filter(destination=name, kind=HoldKind.CREDENTIAL)
        .aggregate(at=Max("ended_at"))["at"]
    )
    if last_hold_end is not None:
        calls = calls.filter(started_at__gt=last_hold_end)
    counts = calls.aggregate(
        calls=Count("id"),
        refused=Count("id", filter=Q(failure_class=FailureClass.CREDENTIAL)),
    )
    calls, refused = counts["calls"], counts["refused"]
    if calls < settings.HANDOFF_BREAKER_CREDENTIAL_MIN_CALLS:
        return None
    if refused < calls * settings.HANDOFF_BREAKER_CREDENTIAL_SHARE:
        return None
    return f"{refused} of the last {calls} calls ({refused / calls:.0%}) refused credentials"
