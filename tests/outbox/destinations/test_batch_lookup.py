"""Settlement over HTTP against the real receiver API (live_server, both backends): a destination that declares a
batch lookup settles N uncertain outcomes in ceil(N / batch) requests of `POST /tasks/lookup`, each answer read by
the contract (same payload: delivered; another payload: a conflict; none: safe to send again); one without it is
asked one `GET /tasks/<key>` per key, as before."""

import math

import pytest

from delivery import faults
from delivery import services as receiver
from outbox.destinations import LookupFailed
from outbox.destinations.http.destination import HttpDestination
from outbox.dispatch.dispatcher import settle_uncertain
from outbox.models import FailureClass, Handoff, HandoffState

pytestmark = pytest.mark.django_db(databases=["default", "delivery"], transaction=True)
S = HandoffState
N = 11
BATCH = 4


@pytest.fixture
def observed(live_server, settings, tmp_path):
    """The receiver's request log: one line per request to its fault-injecting views (POST /tasks/lookup)."""
    faults.reset()
    log = tmp_path / "requests.log"
    settings.RECEIVER_FAULTS = {"observe": str(log)}
    yield log
    settings.RECEIVER_FAULTS = None


def http_destination(live_server, **contract) -> HttpDestination:
    return HttpDestination(url=f"{live_server.url}/delivery/api", connect_timeout=1, **contract)


def uncertain_outcomes(make_handoff) -> list[Handoff]:
    """N uncertain handoffs: most delivered at the receiver, one there with another payload, one never sent."""
    handoffs = [make_handoff(n, state=S.UNCERTAIN) for n in range(1, N + 1)]
    for handoff in handoffs[:-2]:
        receiver.task_create_idempotent(action_key=handoff.action_key, payload=handoff.payload)
    other = handoffs[-2]
    receiver.task_create_idempotent(
        action_key=other.action_key, payload={**other.payload, "plan": "premium"}
    )
    return handoffs


def requests_seen(log) -> list[str]:
    return [line.split()[0] for line in log.read_text().splitlines()] if log.exists() else []


def assert_settled_by_the_receivers_answers(handoffs: list[Handoff]) -> None:
    states = [Handoff.objects.get(pk=h.pk) for h in handoffs]
    assert [h.state for h in states[:-2]] == [S.DELIVERED] * (N - 2)
    assert all(h.receipt["found_by"] == "lookup" and h.destination_id for h in states[:-2])
    assert (states[-2].state, states[-2].failure_class) == (
        S.NEEDS_ATTENTION,
        FailureClass.CONFLICT,
    )
    assert states[-1].state == S.PENDING


def test_a_batch_lookup_settles_n_keys_in_ceil_n_over_batch_requests(
    live_server, observed, make_handoff
):
    handoffs = uncertain_outcomes(make_handoff)
    destination = http_destination(live_server, lookup_batch_size=BATCH)
    settled = settle_uncertain(destination=destination, limit=N)
    assert settled == {S.DELIVERED: N - 2, S.NEEDS_ATTENTION: 1, S.PENDING: 1}
    assert requests_seen(observed) == ["POST"] * math.ceil(N / BATCH)
    assert_settled_by_the_receivers_answers(handoffs)


def test_without_a_batch_lookup_each_key_is_asked_on_its_own(live_server, observed, make_handoff):
    handoffs = uncertain_outcomes(make_handoff)
    destination = http_destination(live_server)
    assert settle_uncertain(destination=destination, limit=N) == {
        S.DELIVERED: N - 2,
        S.NEEDS_ATTENTION: 1,
        S.PENDING: 1,
    }
    assert requests_seen(observed) == []  # no POST /tasks/lookup: N GET /tasks/<key>
    assert_settled_by_the_receivers_answers(handoffs)


def test_the_receiver_refuses_a_batch_lookup_larger_than_its_limit(live_server, settings):
    settings.RECEIVER_BATCH_LIMIT = 2
    destination = http_destination(live_server, lookup_batch_size=3)
    with pytest.raises(LookupFailed, match="HTTP 413"):
        destination.lookup_many(["a:1", "a:2", "a:3"])


def test_a_batch_lookup_names_every_key_asked_found_or_missing(live_server):
    receiver.task_create_idempotent(action_key="onboarding:7:1:1", payload={"client_name": "A"})
    destination = http_destination(live_server, lookup_batch_size=10)
    found = destination.lookup_many(["onboarding:7:1:1", "onboarding:7:2:1"])
    assert found["onboarding:7:1:1"].action_key == "onboarding:7:1:1"
    assert found["onboarding:7:2:1"] is None
