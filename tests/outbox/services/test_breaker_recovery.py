"""Recovery without waiting (issue 26): a destination paused by its breaker resumes on the first evidence
that it is back (an answer to a lookup, an operator's resume that asks it at once), its probes come sooner
when the failure says the receiver is restarting or waits for its database, and while it is paused the
maintenance pass spends its due probe on a lookup of an uncertain outcome."""

import pytest
from django.db.models import F

from outbox.breaker_rules import QUICK_RECOVERY_REASONS, probe_delay
from outbox.destinations import InProcessDestination, LookupFailed
from outbox.dispatch.dispatcher import maintain
from outbox.failures import DeliveryResult
from outbox.models import (
    DestinationEvent,
    DestinationHealth,
    DestinationState,
    FailureClass,
    Handoff,
    HandoffState,
)
from outbox.services.breaker import destination_record_results
from outbox.services.destination_windows import (
    destination_pause_by_operator,
    destination_resume_by_operator,
)
from outbox.settlement.asked import handoff_settle
from tests.factories import grant_destination_admin, make_user

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
D = DestinationState
S = HandoffState


@pytest.fixture(autouse=True)
def breaker_settings(settings):
    settings.HANDOFF_BREAKER_THRESHOLD = 3
    # The scheduled probes are an hour away (a quarter of one for the quick causes): whatever resumes a
    # destination in these tests is the evidence, never the schedule.
    settings.HANDOFF_BREAKER_PROBE_BASE = 900.0
    settings.HANDOFF_BREAKER_PROBE_CAP = 3600.0
    settings.HANDOFF_BREAKER_QUICK_PROBE_CAP = 900.0


def failure(code: str) -> DeliveryResult:
    return DeliveryResult.failed(FailureClass.TRANSIENT, code, "down")


def pause(code: str = "connect_failed", name: str = "receiver") -> DestinationHealth:
    destination_record_results(name=name, results=[failure(code)] * 3)
    health = DestinationHealth.objects.get(name=name)
    assert health.state == D.PAUSED
    return health


def probe_gap(name: str = "receiver") -> float:
    """Seconds from the pause to the next probe, both as the database's clock wrote them."""
    health = DestinationHealth.objects.get(name=name)
    return (health.next_probe_at - health.paused_at).total_seconds()


def uncertain(make_handoff, n: int) -> Handoff:
    handoff = make_handoff(n)
    Handoff.objects.filter(pk=handoff.pk).update(
        state=S.UNCERTAIN, failure_class=FailureClass.UNCERTAIN, reason_code="response_lost"
    )
    return handoff


def test_a_restarting_receiver_or_one_without_its_database_is_probed_on_the_quick_schedule(
    settings,
):
    settings.HANDOFF_BREAKER_PROBE_BASE, settings.HANDOFF_BREAKER_QUICK_PROBE_CAP = 2.0, 5.0
    assert {"connect_failed", "http_500", "http_503"} <= QUICK_RECOVERY_REASONS
    assert [probe_delay(n, "connect_failed") for n in range(4)] == [2.0, 4.0, 5.0, 5.0]
    assert probe_delay(5, "http_503") == 5.0
    # Nothing answering at all, or a credential a person must fix: the slower schedule.
    assert probe_delay(5, "connect_timeout") == probe_delay(5, "credential_rejected") == 64.0


def test_a_pause_by_refused_connections_is_probed_sooner_than_one_by_timeouts(settings):
    settings.HANDOFF_BREAKER_PROBE_BASE, settings.HANDOFF_BREAKER_QUICK_PROBE_CAP = 900.0, 60.0
    pause("connect_failed", name="restarting")
    pause("connect_timeout", name="gone")
    assert probe_gap("restarting") == pytest.approx(60.0, abs=1.0)
    assert probe_gap("gone") == pytest.approx(900.0, abs=1.0)


def test_a_failed_probe_of_a_receiver_waiting_for_its_database_sets_the_next_by_its_cause(settings):
    settings.HANDOFF_BREAKER_QUICK_PROBE_CAP = 60.0
    pause("connect_timeout")
    # The probe slot was taken (on the slower schedule), and the probe's answer was a 503 of a live receiver.
    DestinationHealth.objects.filter(name="receiver").update(probes=F("probes") + 1)
    destination_record_results(name="receiver", results=[failure("http_503")])
    assert probe_gap() == pytest.approx(60.0, abs=1.0)
    assert DestinationHealth.objects.get(name="receiver").state == D.PAUSED


def test_a_lookup_answered_by_a_paused_destination_resumes_it_without_waiting_for_the_probe(
    make_handoff,
):
    handoff = uncertain(make_handoff, 1)
    pause()
    # A person's reconcile (or any settlement) asks the receiver about the key: it answers.
    assert handoff_settle(handoff_id=handoff.pk, destination=InProcessDestination()) == S.PENDING
    health = DestinationHealth.objects.get(name="receiver")
    assert (health.state, health.probes, health.next_probe_at) == (D.ACTIVE, 0, None)
    paused, resumed = DestinationEvent.objects.filter(destination="receiver").order_by("at", "id")
    assert (paused.to_state, resumed.to_state) == (D.PAUSED, D.ACTIVE)
    assert "a lookup" in resumed.reason and "without waiting" in resumed.reason


def test_a_lookup_that_gets_no_answer_leaves_the_destination_paused(make_handoff):
    handoff = uncertain(make_handoff, 1)
    pause()

    class Down(InProcessDestination):
        def lookup(self, action_key):
            raise LookupFailed("receiver not reachable: ConnectError")

    assert handoff_settle(handoff_id=handoff.pk, destination=Down()) == S.UNCERTAIN
    assert DestinationHealth.objects.get(name="receiver").state == D.PAUSED


def test_maintenance_spends_a_due_probe_on_one_lookup_then_settles_the_rest(make_handoff):
    handoffs = [uncertain(make_handoff, n) for n in range(1, 4)]
    pause()
    destination = InProcessDestination()
    # Not due yet: nothing is asked.
    assert maintain(destination=destination).settled == {}
    assert DestinationHealth.objects.get(name="receiver").state == D.PAUSED
    DestinationHealth.objects.filter(name="receiver").update(next_probe_at=F("paused_at"))
    stats = maintain(destination=destination)
    # The first lookup was the probe; its answer resumed the destination, and the pass asked the others.
    assert stats.settled == {S.PENDING: 3}
    assert DestinationHealth.objects.get(name="receiver").state == D.ACTIVE
    assert set(
        Handoff.objects.filter(pk__in=[h.pk for h in handoffs]).values_list("state", flat=True)
    ) == {S.PENDING}


def test_maintenance_keeps_the_probe_for_a_delivery_when_nothing_is_uncertain(make_handoff):
    make_handoff(1)
    pause()
    DestinationHealth.objects.filter(name="receiver").update(next_probe_at=F("paused_at"))
    assert maintain(destination=InProcessDestination()).settled == {}
    health = DestinationHealth.objects.get(name="receiver")
    assert (health.state, health.probes) == (D.PAUSED, 0)


def test_maintenance_asks_nothing_during_an_operators_pause(make_handoff):
    uncertain(make_handoff, 1)
    destination_pause_by_operator(name="receiver", actor=make_user("olga"), reason="upgrade")
    assert maintain(destination=InProcessDestination()).settled == {}
    assert Handoff.objects.get().state == S.UNCERTAIN


def test_an_operators_resume_asks_the_paused_destination_at_once_and_resumes_on_its_answer():
    pause()
    olga = grant_destination_admin(make_user("olga"))
    health = destination_resume_by_operator(
        name="receiver", actor=olga, reason="receiver restarted"
    )
    assert (health.state, health.probes) == (D.ACTIVE, 0)
    reasons = list(
        DestinationEvent.objects.filter(destination="receiver")
        .order_by("at", "id")
        .values_list("to_state", "reason")
    )
    assert [state for state, _ in reasons] == [D.PAUSED, D.PAUSED, D.ACTIVE]
    assert "asked for a probe now" in reasons[1][1]
    assert "resume by olga" in reasons[2][1]
