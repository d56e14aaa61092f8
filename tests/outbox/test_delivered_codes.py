"""Every path to delivered records how the outcome became known (issue 37 item 6): created, duplicate
prevented (the receiver answered the original), settled by lookup, settled by hand. Before, each was
delivered with its reason code blanked, and the four could not be told apart."""

import pytest

from delivery.models import ReceiverTask
from delivery.services import task_create_idempotent
from outbox.dispatch.dispatcher import dispatch_batch, handoff_deliver
from outbox.failures import DeliveryResult
from outbox.models import DestinationHealth, FailureClass, Handoff, HandoffState
from outbox.services import handoff_settle, handoff_settle_manually
from tests.factories import make_user
from tests.outbox.scripted_destination import ScriptedDestination
from tests.reconciliation.test_metrics import labels, scrape

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
S = HandoffState


def test_a_created_task_and_a_duplicate_prevented_have_their_own_codes(make_handoff):
    DestinationHealth.objects.create(name="receiver")
    fresh, again = make_handoff(1), make_handoff(2)
    task_create_idempotent(action_key=again.action_key, payload=again.payload)
    stats = dispatch_batch(destination=ScriptedDestination(), worker="w1")
    assert (stats.delivered, stats.duplicates) == (2, 1)
    for handoff in (fresh, again):
        assert ReceiverTask.objects.filter(action_key=handoff.action_key).count() == 1
    codes = dict(Handoff.objects.values_list("pk", "reason_code"))
    assert codes == {fresh.pk: "created", again.pk: "duplicate_prevented"}
    assert Handoff.objects.filter(state=S.DELIVERED).count() == 2


def test_metrics_tell_the_ways_to_delivered_apart(make_handoff, client):
    DestinationHealth.objects.create(name="receiver")
    make_handoff(1)
    again = make_handoff(2)
    task_create_idempotent(action_key=again.action_key, payload=again.payload)
    dispatch_batch(destination=ScriptedDestination(), worker="w1")
    samples = scrape(client)
    by_reason = {
        dict(tags)["reason_code"]: value
        for (name, tags), value in samples.items()
        if name == "handoff_delivered_by_reason"
    }
    assert by_reason == {"created": 1, "duplicate_prevented": 1}
    assert samples[("handoff_completed_total", labels(workflow="onboarding", workspace="7"))] == 2


def test_an_unknown_outcome_settled_by_looking_the_key_up(make_handoff):
    handoff = make_handoff()
    task_create_idempotent(action_key=handoff.action_key, payload=handoff.payload)
    destination = ScriptedDestination(
        DeliveryResult.failed(FailureClass.UNCERTAIN, "read_timeout", "timeout")
    )
    assert handoff_deliver(handoff_id=handoff.pk, destination=destination) == S.UNCERTAIN
    assert Handoff.objects.get(pk=handoff.pk).reason_code == "read_timeout"
    assert handoff_settle(handoff_id=handoff.pk, destination=destination) == S.DELIVERED
    handoff.refresh_from_db()
    assert (handoff.reason_code, handoff.failure_class) == ("settled_by_lookup", "")
    assert ReceiverTask.objects.filter(action_key=handoff.action_key).count() == 1


def test_an_unknown_outcome_settled_by_a_persons_check(make_handoff):
    handoff = make_handoff()
    destination = ScriptedDestination(
        DeliveryResult.failed(FailureClass.UNCERTAIN, "read_timeout", "t"),
        supports_idempotency=False,
        supports_lookup=False,
    )
    assert handoff_deliver(handoff_id=handoff.pk, destination=destination) == S.NEEDS_ATTENTION
    handoff_settle_manually(
        handoff_id=handoff.pk,
        actor=make_user("olga"),
        receiver_task_id="T-42",
        reason="found it at the receiver",
    )
    handoff.refresh_from_db()
    assert (handoff.state, handoff.destination_id) == (S.DELIVERED, "T-42")
    assert handoff.reason_code == "settled_by_hand"
    assert destination.calls == 1
