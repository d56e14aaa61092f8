"""A settlement pass at a destination that answers many keys a request (`outbox/settlement/passes.py`): a pass asks
at least REQUESTS_A_PASS (4) requests when that many keys wait, so that the dispatcher's turn around it and its
claim are paid once for them, and its statements per settled key stay few: the claim, and per request a permit
and one write of its answers. Both backends unless marked."""

import pytest
from django.db import connection

from delivery import services as receiver
from outbox.destinations import InProcessDestination
from outbox.dispatch.dispatcher import maintain
from outbox.models import DestinationHealth, Handoff, HandoffEvent, HandoffState
from outbox.services.lookup_limits import LimitedLookups
from outbox.settlement import passes as settling

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
S = HandoffState
PER_REQUEST = 5


class CountingBatches(InProcessDestination):
    """The in-process receiver answering PER_REQUEST keys a request, counting its requests."""

    def __init__(self, per_request: int = PER_REQUEST):
        super().__init__(lookup_batch_size=per_request)
        self.requests: list[list[str]] = []

    def lookup_many(self, action_keys):
        self.requests.append(list(action_keys))
        return super().lookup_many(action_keys)


def lost_answers(make_handoff, count: int) -> list[Handoff]:
    """Uncertain at the source while the receiver holds each task with the same payload."""
    handoffs = [make_handoff(n, state=S.UNCERTAIN) for n in range(1, count + 1)]
    for handoff in handoffs:
        receiver.task_create_idempotent(action_key=handoff.action_key, payload=handoff.payload)
    return handoffs


def test_a_pass_asks_four_requests_of_keys_when_they_wait(make_handoff):
    backlog = settling.REQUESTS_A_PASS * PER_REQUEST + 1
    handoffs = lost_answers(make_handoff, backlog)
    destination = CountingBatches()
    # The dispatcher's maintenance asks for fewer keys than one request: the pass still makes four.
    settled = settling.settle_pass(
        destination=LimitedLookups(destination, worker="a"), worker="a", limit=2
    )
    assert settled.claimed == settling.REQUESTS_A_PASS * PER_REQUEST
    assert settled.backlog
    assert settled.outcomes == {S.DELIVERED: settling.REQUESTS_A_PASS * PER_REQUEST}
    assert [len(keys) for keys in destination.requests] == [PER_REQUEST] * settling.REQUESTS_A_PASS
    asked = [key for keys in destination.requests for key in keys]
    assert len(set(asked)) == len(asked)  # each key once
    delivered = Handoff.objects.filter(state=S.DELIVERED)
    assert sorted(delivered.values_list("action_key", flat=True)) == sorted(asked)
    assert HandoffEvent.objects.filter(to_state=S.DELIVERED).count() == len(asked)
    # The one left waits, free, for the next pass.
    [left] = Handoff.objects.filter(state=S.UNCERTAIN)
    assert left.action_key not in asked
    assert (left.lease_owner, left.lease_expires_at) == ("", None)
    assert len(handoffs) == backlog


def test_a_pass_with_fewer_keys_waiting_asks_one_request(make_handoff):
    lost_answers(make_handoff, PER_REQUEST - 1)
    destination = CountingBatches()
    settled = settling.settle_pass(
        destination=LimitedLookups(destination, worker="a"), worker="a", limit=2
    )
    assert settled.outcomes == {S.DELIVERED: PER_REQUEST - 1}
    assert not settled.backlog
    assert [len(keys) for keys in destination.requests] == [PER_REQUEST - 1]


def test_a_maintenance_pass_claims_four_requests_of_keys_not_its_limit_rounded_up(make_handoff):
    """The dispatcher's maintenance asks for 50 keys (`maintain`'s `settle_limit`); at 20 keys a request that is
    3 requests, and the pass makes 4: 80 keys claimed and settled in one pass, one claim and one turn for them
    (a pass of 2 requests paid them per 40 keys at 20 a request, per 200 at the bench's 100)."""
    lost_answers(make_handoff, 81)
    destination = CountingBatches(per_request=20)
    settled = settling.settle_pass(
        destination=LimitedLookups(destination, worker="a"), worker="a", limit=50
    )
    assert (settled.claimed, settled.backlog) == (80, True)
    assert settled.outcomes == {S.DELIVERED: 80}
    assert [len(keys) for keys in destination.requests] == [20, 20, 20, 20]
    assert Handoff.objects.filter(state=S.UNCERTAIN).count() == 1


@pytest.mark.postgres
def test_a_pass_writes_few_statements_per_settled_key(make_handoff, django_assert_max_num_queries):
    """The claim, then per request its permit (the destination's limits, breaker and holds in one read, whether
    or not it has its row yet: a healthy one may never get one) and one write of its answers: 5 statements for
    20 keys here, 9 for 400 at the bench's 100 keys a request."""
    assert connection.vendor == "postgresql", "the one-statement write is PostgreSQL's"
    count = settling.REQUESTS_A_PASS * PER_REQUEST
    lost_answers(make_handoff, count)
    destination = LimitedLookups(CountingBatches(), worker="a")
    assert not DestinationHealth.objects.filter(name=destination.name).exists()
    with django_assert_max_num_queries(1 + 2 * settling.REQUESTS_A_PASS):
        settled = settling.settle_pass(destination=destination, worker="a", limit=count)
    assert settled.outcomes == {S.DELIVERED: count}
    assert Handoff.objects.filter(state=S.DELIVERED).count() == count


@pytest.mark.postgres
def test_a_maintenance_turn_settles_a_batch_in_eleven_statements(
    make_handoff, django_assert_max_num_queries
):
    """A dispatcher's maintenance turn at a healthy destination: its settlement admission (one read), its
    deadline sweep (one read), then the pass (the claim, and per request a permit and a write): 11 statements
    for the turn's 4 requests, however many keys they carry."""
    assert connection.vendor == "postgresql", "the one-statement write is PostgreSQL's"
    count = settling.REQUESTS_A_PASS * PER_REQUEST
    lost_answers(make_handoff, count)
    destination = CountingBatches()
    with django_assert_max_num_queries(3 + 2 * settling.REQUESTS_A_PASS):
        stats = maintain(destination=destination, expire_leases=False)
    assert stats.settled == {S.DELIVERED: count}
    assert len(destination.requests) == settling.REQUESTS_A_PASS
    assert Handoff.objects.filter(state=S.DELIVERED).count() == count
    assert HandoffEvent.objects.filter(to_state=S.DELIVERED).count() == count
