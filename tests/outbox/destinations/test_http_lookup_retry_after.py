"""The http kind's lookups honour Retry-After: a lookup (one key's `GET /tasks/<key>`, a batch's
`POST /tasks/lookup`, the key listing) answered 429 or 503 with Retry-After holds the whole destination as a
delivery's answer does (`outbox/services/lookup_limits.py`): on the database clock, worded the same, and nothing
asks the receiver until it ends; then settlement settles. Against the real receiver API (live_server) and its
`lookups_refused` fault. Both backends."""

import pytest

from delivery import faults
from delivery import services as receiver
from outbox.clock import db_now_plus
from outbox.destinations import LookupFailed
from outbox.destinations.http.destination import HttpDestination
from outbox.dispatch.dispatcher import dispatch_batch, settle_uncertain
from outbox.models import Handoff, HandoffState
from outbox.services.work_pull import handoffs_pull_work_status
from tests.factories import retry_after_rows
from tests.outbox.services.test_work_pull import (  # noqa: F401 (the fixture)
    accounts,
    delivered_to,
    read_long_ago,
)

pytestmark = pytest.mark.django_db(databases=["default", "delivery"], transaction=True)
S = HandoffState
NAME = "receiver"


@pytest.fixture
def observed(live_server, settings, tmp_path):
    """The receiver's request log, its lookups refused `[status, "300"]` by `refuse(status)`."""
    faults.reset()
    log = tmp_path / "requests.log"
    settings.RECEIVER_FAULTS = {"observe": str(log)}

    def refuse(status: int | None) -> None:
        refused = [status, "300"] if status else None
        settings.RECEIVER_FAULTS = {"observe": str(log), "lookups_refused": refused}

    yield log, refuse
    settings.RECEIVER_FAULTS = None


def refused_lookups(log) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


def uncertain(make_handoff, count: int) -> list[Handoff]:
    """`count` uncertain handoffs, each delivered at the receiver: a lookup settles them as delivered."""
    handoffs = [make_handoff(n, state=S.UNCERTAIN) for n in range(1, count + 1)]
    for handoff in handoffs:
        receiver.task_create_idempotent(action_key=handoff.action_key, payload=handoff.payload)
    return handoffs


@pytest.mark.parametrize(
    ("status", "batch_size"),
    [(429, 0), (503, 0), (429, 4)],
    ids=["get-429", "get-503", "batch-429"],
)
def test_a_lookups_retry_after_holds_the_destination_until_it_ends(
    live_server, observed, make_handoff, settings, status, batch_size
):
    settings.HANDOFF_DESTINATION_MAX_HOLD_SECONDS = 600
    log, refuse = observed
    handoffs = uncertain(make_handoff, 3)
    destination = HttpDestination(
        url=f"{live_server.url}/delivery/api", connect_timeout=1, lookup_batch_size=batch_size
    )
    refuse(status)

    # One batch asks about all three; one key at a time, the first GET refused ends the pass, the rest unasked.
    assert settle_uncertain(destination=destination, limit=3) == {
        S.UNCERTAIN: 3 if batch_size else 1
    }
    # Held on the database clock as long as asked, worded as a delivery's Retry-After hold.
    [hold] = retry_after_rows(NAME)
    assert hold.reason == f"HTTP {status} with Retry-After 300 s"
    # A minute's leeway for a loaded machine's stalls between the answer and this check.
    assert retry_after_rows(NAME).filter(
        ends_at__gt=db_now_plus(240), ends_at__lte=db_now_plus(300)
    )
    assert refused_lookups(log) == 1
    # Until it ends nobody asks: neither settlement again nor a delivery.
    settle_uncertain(destination=destination, limit=3)
    waiting = make_handoff(9)
    assert dispatch_batch(destination=destination).claimed == 0
    assert refused_lookups(log) == 1
    # Its end passed: settlement asks again and settles; the waiting handoff is delivered.
    refuse(None)
    retry_after_rows(NAME).update(ends_at=db_now_plus(-1))
    assert settle_uncertain(destination=destination, limit=3) == {S.DELIVERED: 3}
    dispatch_batch(destination=destination)
    assert [Handoff.objects.get(pk=h.pk).state for h in [*handoffs, waiting]] == [S.DELIVERED] * 4
    destination.close()


def test_a_key_listings_retry_after_is_carried_to_the_caller(live_server, observed):
    _log, refuse = observed
    destination = HttpDestination(url=f"{live_server.url}/delivery/api", connect_timeout=1)
    refuse(429)
    with pytest.raises(LookupFailed) as refused:
        destination.list_keys()
    assert (refused.value.status_code, refused.value.retry_after) == (429, 300)
    assert str(refused.value) == "key listing answered HTTP 429"
    refuse(None)
    assert destination.list_keys() == []
    destination.close()


def test_a_work_status_reads_retry_after_holds_the_destination(accounts, settings):  # noqa: F811
    """The pulled work status read over HTTP (`work_read.py`, the contract-configured kind's): the same hold."""
    settings.HANDOFF_DESTINATION_MAX_HOLD_SECONDS = 600
    handoff = delivered_to("accounts", 60)
    account = handoff.destination_id
    accounts.refuse(account, [429, "300"])

    handoffs_pull_work_status()
    [hold] = retry_after_rows("accounts")
    assert hold.reason == "HTTP 429 with Retry-After 300 s"
    assert retry_after_rows("accounts").filter(ends_at__gt=db_now_plus(240))
    read_long_ago(handoff)
    handoffs_pull_work_status()  # held: not asked
    assert accounts.reads() == {account: 1}

    accounts.refuse(account, None)
    retry_after_rows("accounts").update(ends_at=db_now_plus(-1))
    read_long_ago(handoff)
    handoffs_pull_work_status()
    handoff.refresh_from_db()
    assert (handoff.work_status, accounts.reads()) == ("open", {account: 2})
