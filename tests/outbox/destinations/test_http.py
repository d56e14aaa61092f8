"""The HTTP destination against the real receiver API served by live_server, with injected faults.

Runs on both backends, so the embedded SQLite default is tested over real HTTP too.
"""

import pytest

from delivery import faults
from delivery.models import ReceiverTask
from outbox.destinations.http.destination import HttpDestination
from outbox.dispatch.dispatcher import handoff_deliver
from outbox.models import Attempt, FailureClass, HandoffState
from outbox.services import handoff_settle

pytestmark = pytest.mark.django_db(databases=["default", "delivery"], transaction=True)
S = HandoffState
# Every call waits for its answer as long as the product does by default: on two cores shared with PostgreSQL,
# gunicorn and Chromium the live server may answer an ordinary call later than half a second, which a read
# timeout of 0.5 s (as these calls once had) turned into an uncertain outcome.
READ_TIMEOUT = 5.0
# Only the call that meets the slow fault gives up sooner. The receiver commits, then answers SLOW_SECONDS after
# the call arrived: later than the impatient client waits, however loaded the machine.
IMPATIENT_READ_TIMEOUT = 2.0
SLOW_SECONDS = IMPATIENT_READ_TIMEOUT + 0.5


def http_destination(live_server, read_timeout: float) -> HttpDestination:
    return HttpDestination(
        url=f"{live_server.url}/delivery/api",
        read_timeout=read_timeout,
        connect_timeout=1,
        retry={"max_attempts": 3, "base_delay": 0, "max_delay": 0},
    )


@pytest.fixture
def receiver(live_server, settings):
    faults.reset()
    settings.RECEIVER_FAULTS = None
    destination = http_destination(live_server, READ_TIMEOUT)
    yield destination
    destination.close()
    faults.reset()


@pytest.fixture
def impatient(receiver, live_server):
    """The same receiver, called by a client that gives up before a slow answer comes."""
    destination = http_destination(live_server, IMPATIENT_READ_TIMEOUT)
    yield destination
    destination.close()


def inject(settings, key: str, kind: str):
    settings.RECEIVER_FAULTS = {
        "keys": {key: kind},
        "slow_seconds": SLOW_SECONDS,
        # Five minutes: the checks that the hold is still on leave a minute for a loaded machine's stalls
        # between the answer and the check (30 s left 5).
        "retry_after": 300,
    }


def test_delivers_over_signed_http_and_validates_the_receipt(receiver, make_handoff):
    handoff = make_handoff()
    assert handoff_deliver(handoff_id=handoff.pk, destination=receiver) == S.DELIVERED
    handoff.refresh_from_db()
    assert handoff.destination_id == str(
        ReceiverTask.objects.get(action_key=handoff.action_key).task_id
    )
    attempt = Attempt.objects.get(handoff=handoff)
    assert attempt.status_code == 201 and attempt.latency_ms is not None


def test_a_delivery_does_not_word_its_answer_as_a_failure_would(
    receiver, make_handoff, monkeypatch
):
    """The answer's wording (parsed, dumped and redacted again) is for a failure's detail; a delivery has its
    receipt. A failure is still worded (`test_each_injected_fault_is_classified`)."""
    import outbox.destinations.http.destination

    def worded(_response):
        raise AssertionError("a delivery's answer was worded as a failure's detail")

    monkeypatch.setattr(outbox.destinations.http.destination, "describe_answer", worded)
    handoff = make_handoff()
    assert handoff_deliver(handoff_id=handoff.pk, destination=receiver) == S.DELIVERED


def test_a_closed_destination_opens_connections_again(receiver, make_handoff):
    receiver.close()  # as reset_destination() does
    handoff = make_handoff()
    assert handoff_deliver(handoff_id=handoff.pk, destination=receiver) == S.DELIVERED


@pytest.mark.parametrize(
    ("kind", "state", "failure_class", "reason", "task_created"),
    [
        ("http_503", S.PENDING, FailureClass.TRANSIENT, "http_503", False),
        ("http_429", S.PENDING, FailureClass.TRANSIENT, "rate_limited", False),
        ("http_500", S.UNCERTAIN, FailureClass.UNCERTAIN, "http_500", False),
        ("http_401", S.PENDING, FailureClass.CREDENTIAL, "credential_rejected", False),
        ("malformed", S.UNCERTAIN, FailureClass.MALFORMED, "malformed_receipt", True),
        ("slow", S.UNCERTAIN, FailureClass.UNCERTAIN, "read_timeout", True),
    ],
)
def test_each_injected_fault_is_classified(
    receiver, impatient, settings, make_handoff, kind, state, failure_class, reason, task_created
):
    handoff = make_handoff()
    inject(settings, handoff.action_key, kind)
    destination = impatient if kind == "slow" else receiver
    assert handoff_deliver(handoff_id=handoff.pk, destination=destination) == state
    handoff.refresh_from_db()
    assert (handoff.failure_class, handoff.reason_code) == (failure_class, reason)
    assert handoff.destination_id == ""
    assert ReceiverTask.objects.filter(action_key=handoff.action_key).exists() == task_created
    if kind.startswith("http_"):  # the answer, worded for the person who reads the failure
        assert handoff.last_error.startswith(f"HTTP {kind[5:]}: "), handoff.last_error


def test_retry_after_is_honoured(receiver, settings, make_handoff):
    from django.utils import timezone

    handoff = make_handoff()
    inject(settings, handoff.action_key, "http_429")
    handoff_deliver(handoff_id=handoff.pk, destination=receiver)
    handoff.refresh_from_db()
    assert (handoff.next_attempt_at - timezone.now()).total_seconds() > 240


@pytest.mark.parametrize("kind", ["malformed", "slow"])
def test_unknown_outcome_settles_by_lookup_to_the_task_already_created(
    receiver, impatient, settings, make_handoff, kind
):
    handoff = make_handoff()
    inject(settings, handoff.action_key, kind)
    handoff_deliver(handoff_id=handoff.pk, destination=impatient if kind == "slow" else receiver)
    assert handoff_settle(handoff_id=handoff.pk, destination=receiver) == S.DELIVERED
    handoff.refresh_from_db()
    assert ReceiverTask.objects.count() == 1
    assert handoff.destination_id == str(ReceiverTask.objects.get().task_id)


def test_http_500_before_commit_settles_to_pending_then_delivers_once(
    receiver, settings, make_handoff
):
    handoff = make_handoff()
    inject(settings, handoff.action_key, "http_500")
    handoff_deliver(handoff_id=handoff.pk, destination=receiver)
    assert handoff_settle(handoff_id=handoff.pk, destination=receiver) == S.PENDING
    assert handoff_deliver(handoff_id=handoff.pk, destination=receiver) == S.DELIVERED
    assert ReceiverTask.objects.count() == 1


def test_receiver_down_is_transient(make_handoff):
    handoff = make_handoff()
    closed = HttpDestination(url="http://127.0.0.1:9/delivery/api", connect_timeout=0.5)
    assert handoff_deliver(handoff_id=handoff.pk, destination=closed) == S.PENDING
    handoff.refresh_from_db()
    assert (handoff.failure_class, handoff.reason_code) == (
        FailureClass.TRANSIENT,
        "connect_failed",
    )


def test_iterating_keys_pages_through_the_receiver(receiver, make_handoff):
    for n in range(1, 8):
        handoff_deliver(handoff_id=make_handoff(n).pk, destination=receiver)
    keys, after = [], ""
    while page := receiver.list_keys(after=after, limit=3):
        keys += [task.action_key for task in page]
        after = page[-1].action_key
    assert keys == sorted(f"onboarding:7:{n}:1" for n in range(1, 8))


@pytest.fixture
def batch_receiver(receiver):
    receiver.supports_batch = True
    return receiver


def test_batch_delivery_records_every_outcome_in_one_call(batch_receiver, settings, make_handoff):
    from delivery.services import task_create_idempotent
    from outbox.dispatch.dispatcher import dispatch_batch

    handoffs = [make_handoff(n) for n in range(1, 6)]
    task_create_idempotent(
        action_key=handoffs[1].action_key, payload=handoffs[1].payload
    )  # already there
    task_create_idempotent(
        action_key=handoffs[2].action_key, payload={"client_name": "other"}
    )  # conflict
    settings.RECEIVER_FAULTS = {
        "keys": {handoffs[3].action_key: "http_503", handoffs[4].action_key: "malformed"}
    }
    stats = dispatch_batch(destination=batch_receiver, worker="w1", limit=10)
    states = {h.action_key: handoff_state(h) for h in handoffs}
    assert stats.claimed == 5
    assert [states[h.action_key] for h in handoffs] == [
        (S.DELIVERED, ""),
        (S.DELIVERED, ""),
        (S.NEEDS_ATTENTION, FailureClass.CONFLICT),
        (S.PENDING, FailureClass.TRANSIENT),
        (S.UNCERTAIN, FailureClass.MALFORMED),
    ]
    assert stats.duplicates == 1
    assert Attempt.objects.filter(latency_ms__isnull=False).count() == 5


def handoff_state(handoff):
    handoff.refresh_from_db()
    return handoff.state, handoff.failure_class


def test_a_429_with_retry_after_holds_the_whole_destination(receiver, settings, make_handoff):
    from outbox.clock import db_now_plus
    from outbox.dispatch.dispatcher import dispatch_batch
    from outbox.models import DestinationHealth

    first, second = make_handoff(1), make_handoff(2)
    inject(settings, first.action_key, "http_429")
    assert handoff_deliver(handoff_id=first.pk, destination=receiver) == S.PENDING
    assert (
        DestinationHealth.objects.with_retry_after()
        .filter(hold_until__gt=db_now_plus(240), hold_reason__contains="429")
        .exists()
    )
    held = dispatch_batch(destination=receiver, worker="w2")
    assert held.limited and held.claimed == 0
    second.refresh_from_db()
    assert (second.state, second.attempts) == (S.PENDING, 0)


def test_a_batch_items_429_with_retry_after_holds_the_destination(
    batch_receiver, settings, make_handoff
):
    from outbox.clock import db_now_plus
    from outbox.dispatch.dispatcher import dispatch_batch
    from outbox.models import DestinationHealth

    handoffs = [make_handoff(n) for n in range(1, 4)]
    inject(settings, handoffs[1].action_key, "http_429")
    stats = dispatch_batch(destination=batch_receiver, worker="w1", limit=10)
    assert (stats.claimed, stats.delivered, stats.retrying) == (3, 2, 1)
    assert (
        DestinationHealth.objects.with_retry_after()
        .filter(hold_until__gt=db_now_plus(240))
        .exists()
    )
    assert dispatch_batch(destination=batch_receiver, worker="w1").limited


def test_a_batch_refused_as_too_large_is_given_back_and_single_calls_stay_within_the_rate_limit(
    batch_receiver, settings, make_handoff
):
    """A 413 to a batch call means nothing was read. Falling back to single calls there and then would send
    requests the permit (one request for the batch call) does not cover, past the operator's limit."""
    from outbox.dispatch.dispatcher import dispatch_batch
    from outbox.models import DestinationSlot
    from outbox.services.limits import destination_set_limits
    from tests.factories import make_user

    destination_set_limits(
        name=batch_receiver.name,
        max_concurrency=None,
        max_requests_per_second=3,
        actor=make_user("olga"),
        reason="receiver team asked",
    )
    settings.RECEIVER_BATCH_LIMIT = 2
    handoffs = [make_handoff(n) for n in range(1, 6)]

    refused = dispatch_batch(destination=batch_receiver, worker="w1", limit=10)
    assert (refused.claimed, refused.delivered, refused.released) == (5, 0, 5)
    assert ReceiverTask.objects.count() == 0
    for handoff in handoffs:
        handoff.refresh_from_db()
        assert (handoff.state, handoff.attempts_in_run) == (S.PENDING, 0)
    assert set(Attempt.objects.values_list("outcome", flat=True)) == {"skipped"}
    assert not batch_receiver.batching()

    # One call per handoff now, each taking one of the 3 rate slots of a second (the batch call took one).
    DestinationSlot.objects.filter(free_at__isnull=False).update(
        free_at=None
    )  # the batch call's second passed
    single = dispatch_batch(destination=batch_receiver, worker="w1", limit=10)
    assert (single.claimed, single.delivered) == (3, 3)
    assert ReceiverTask.objects.count() == 3
