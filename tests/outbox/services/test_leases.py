"""Lease expiry (`outbox/dispatch/leases.py`): an in-flight handoff whose lease ran out becomes uncertain,
unless its call was marked as not started yet (a destination without idempotency): then it goes again."""

from datetime import timedelta

import pytest
from django.utils import timezone

from outbox.dispatch.claims import handoff_claim_due
from outbox.dispatch.leases import attempt_mark_calling, handoff_expire_leases
from outbox.models import (
    Attempt,
    AttemptOutcome,
    Handoff,
    HandoffEvent,
    HandoffState,
)
from tests.builders import approve
from tests.console.clients import client_for
from tests.factories import onboarding_world

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
S = HandoffState


def test_expired_lease_makes_in_flight_uncertain_never_pending(make_handoff):
    handoff = make_handoff()
    handoff_claim_due(worker="w1")
    Handoff.objects.filter(pk=handoff.pk).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )
    handoff_expire_leases()
    handoff.refresh_from_db()
    assert handoff.state == S.UNCERTAIN
    assert not HandoffEvent.objects.filter(
        handoff=handoff, from_state=S.IN_FLIGHT, to_state=S.PENDING
    ).exists()


def test_the_clusters_dispatch_task_expires_ran_out_leases_before_the_once_a_minute_sweep(
    make_handoff,
):
    """With only the django-q2 cluster running, a wake-up's task notices a stranded row at once."""
    from outbox import tasks

    stranded = make_handoff()
    handoff_claim_due(worker="lost-worker")
    Handoff.objects.filter(pk=stranded.pk).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )
    assert tasks.dispatch_due()["expired_leases"] == 1
    stranded.refresh_from_db()
    assert stranded.state != S.IN_FLIGHT
    assert HandoffEvent.objects.filter(
        handoff=stranded, from_state=S.IN_FLIGHT, to_state=S.UNCERTAIN
    ).exists()


def expire_leases_of(*handoffs: Handoff) -> int:
    Handoff.objects.filter(pk__in=[h.pk for h in handoffs]).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )
    return handoff_expire_leases()


@pytest.fixture
def world(db):
    return onboarding_world()


def test_a_lease_that_ran_out_before_a_marked_call_started_sends_it_again_never_to_a_person(world):
    """At a destination without idempotency the dispatcher marks its claims "not called yet", then each call
    "sending now" just before it: of a worker that died after its first call started, only that one is
    unknown; the one it never sent is pending again (same key, not counted against its run), and its page
    never says "during the call"."""
    called, never_sent = approve(world, number=1), approve(world, number=2)
    claims = handoff_claim_due(worker="w1", mark_not_called=True)
    assert attempt_mark_calling(claim=claims[0])

    assert expire_leases_of(called, never_sent) == 2
    called.refresh_from_db()
    never_sent.refresh_from_db()
    assert called.state == S.UNCERTAIN
    assert never_sent.state == S.PENDING
    assert (never_sent.attempts, never_sent.attempts_in_run) == (1, 0)
    [attempt] = Attempt.objects.filter(handoff=never_sent)
    assert (attempt.outcome, attempt.call_started) == (AttemptOutcome.SKIPPED, False)
    [event] = HandoffEvent.objects.filter(handoff=never_sent, from_state=S.IN_FLIGHT)
    assert event.to_state == S.PENDING and "never sent" in event.reason
    page = client_for(world["olga"]).get(f"/handoffs/{never_sent.pk}/").content.decode()
    assert "never sent" in page
    assert "during the call" not in page
    page = client_for(world["olga"]).get(f"/handoffs/{called.pk}/").content.decode()
    assert "during the call" in page


def test_a_call_is_not_marked_sending_once_its_lease_was_expired_by_the_sweep(world):
    """The attempt's row decides the race between the sweep and the worker: the sweep that made the claim
    pending again first refuses the worker's mark, so nothing is sent by a worker that no longer holds it."""
    handoff = approve(world, number=1)
    [claim] = handoff_claim_due(worker="w1", mark_not_called=True)
    assert expire_leases_of(handoff) == 1
    assert not attempt_mark_calling(claim=claim)
    handoff.refresh_from_db()
    assert handoff.state == S.PENDING
    [attempt] = Attempt.objects.filter(handoff=handoff)
    assert (attempt.outcome, attempt.call_started) == (AttemptOutcome.SKIPPED, False)
