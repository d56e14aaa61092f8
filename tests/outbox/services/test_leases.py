"""Lease expiry (`outbox/services/leases.py`): an in-flight handoff whose lease ran out becomes uncertain."""

from datetime import timedelta

import pytest
from django.utils import timezone

from outbox.models import (
    Handoff,
    HandoffEvent,
    HandoffState,
)
from outbox.services.claims import handoff_claim_due
from outbox.services.leases import handoff_expire_leases

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
