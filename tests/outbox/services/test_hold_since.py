"""A Retry-After hold records when it began (its `DestinationHold` row's start, database clock): a new hold starts
now, an answer that extends the hold in force keeps its start, and a hold after the last one ended starts
again. The handoff list and page say "held since …, until …" from it."""

import pytest

from outbox.clock import db_now, db_now_plus
from outbox.failures import DeliveryResult
from outbox.models import DestinationHealth, FailureClass
from outbox.services.limits import destination_acquire, destination_release
from tests.factories import retry_after_rows

pytestmark = pytest.mark.django_db


def _too_many_requests(seconds: float) -> list[DeliveryResult]:
    return [
        DeliveryResult.failed(
            FailureClass.TRANSIENT,
            "http_429",
            "too many requests",
            status_code=429,
            retry_after=seconds,
        )
    ]


def _call_in_flight(worker: str = "test"):
    """A call's permit, taken while the destination takes calls."""
    return destination_acquire(name="receiver", worker=worker, requests=1, lease_seconds=30)


def _answered_retry_after(seconds: float, permit=None) -> None:
    permit = permit or _call_in_flight()
    permit.made(_too_many_requests(seconds))
    destination_release(permit=permit)


def _receiver():
    return DestinationHealth.objects.with_retry_after().filter(name="receiver")


def test_a_new_hold_starts_now_on_the_database_clock():
    _answered_retry_after(30)
    # A minute back: a loaded machine can stall for seconds between the answer and this check.
    assert _receiver().filter(hold_since__gt=db_now_plus(-60), hold_since__lte=db_now()).exists()


def test_an_answer_extending_the_hold_in_force_keeps_its_start():
    late = _call_in_flight("late")
    _answered_retry_after(30)
    # The hold in force began an hour ago; the call still in flight is answered with a longer Retry-After.
    retry_after_rows("receiver").update(starts_at=db_now_plus(-3600))
    _answered_retry_after(300, permit=late)
    assert _receiver().filter(hold_until__gt=db_now_plus(240)).exists()
    assert _receiver().filter(hold_since__lt=db_now_plus(-3500)).exists()


def test_a_hold_after_the_last_one_ended_starts_again():
    _answered_retry_after(30)
    retry_after_rows("receiver").update(starts_at=db_now_plus(-3600), ends_at=db_now_plus(-0.001))
    _answered_retry_after(30)
    assert _receiver().filter(hold_since__gt=db_now_plus(-60)).exists()
