"""A lookup's own 429 or 503 with Retry-After, or its token endpoint's, holds the destination as a delivery's
answer does (`outbox/services/lookup_limits.py`): the same Retry-After hold on the database clock, the same cap,
the same words, and nothing (settlement, a person's reconcile, a delivery) asks the destination until it ends.
Against the ledger API and the OAuth2 token server, each a process of its own. Both backends."""

import json
import time
from io import StringIO

import pytest
from django.core.management import call_command

from outbox.clock import db_now_plus
from outbox.destinations.registry import destination_from_config
from outbox.dispatch.dispatcher import dispatch_batch, settle_uncertain
from outbox.models import Handoff, HandoffState
from outbox.services.destination_probes import ProbeHeld, destination_probe
from outbox.services.destination_windows import (
    destination_pause_by_operator,
    destination_resume_by_operator,
)
from outbox.services.lookup_limits import DestinationBusy, lookups_under_limits
from outbox.settlement.asked import handoff_settle
from tests.factories import HandoffFactory, retry_after_hold, retry_after_rows
from tests.outbox.destinations.test_idempotency_key_http import (  # noqa: F401 (fixtures)
    KEY,
    NAME,
    handoff_42,
    ledger,
    ledger_config,
    ledger_destination,
)
from tests.outbox.destinations.test_oauth2_credentials import (  # noqa: F401 (fixtures)
    config,
    oauth2_auth,
    servers,
)

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
S = HandoffState


@pytest.fixture
def destination(ledger):  # noqa: F811
    """The ledger, asked before anything is sent again: a failed lookup leaves the outcome uncertain."""
    destination = ledger_destination(ledger, replays_same_key=False)
    yield destination
    destination.close()


def lookups(ledger) -> list[dict]:  # noqa: F811 (the fixture's value)
    return [r for r in ledger.state()["requests"] if r["method"] == "GET"]


def uncertain_42(ledger, destination) -> Handoff:  # noqa: F811
    """Handoff 42 created at the ledger, its answer lost: uncertain, to be settled by a lookup."""
    handoff = handoff_42()
    ledger.faults(drop_answer_for=[KEY])
    dispatch_batch(destination=destination)
    assert Handoff.objects.get(pk=handoff.pk).state == S.UNCERTAIN
    return handoff


def applied(ledger, tmp_path) -> None:  # noqa: F811
    """The ledger as a destination row (`manage.py destinations apply`), as an operator's pause needs."""
    path = tmp_path / "destinations.json"
    path.write_text(json.dumps({"destinations": [ledger_config(ledger.url)]}))
    call_command("destinations", "apply", str(path), stdout=StringIO())


def a_person_asks(handoff: Handoff, destination) -> str:  # noqa: F811
    """A person's reconcile, without waiting for a permit."""
    return handoff_settle(
        handoff_id=handoff.pk,
        destination=lookups_under_limits(destination, worker="person", wait_seconds=0),
    )


@pytest.mark.parametrize("status", [429, 503])
def test_a_lookups_retry_after_holds_the_destination_and_nothing_asks_until_it_ends(
    ledger,  # noqa: F811
    destination,  # noqa: F811
    settings,
    status,
):
    settings.HANDOFF_DESTINATION_MAX_HOLD_SECONDS = 600
    handoff = uncertain_42(ledger, destination)
    ledger.faults(lookups_refused=[status, "300"])

    assert settle_uncertain(destination=destination) == {S.UNCERTAIN: 1}
    # Held on the database clock as long as asked, worded as a delivery's Retry-After hold.
    [hold] = retry_after_rows(NAME)
    assert hold.reason == f"HTTP {status} with Retry-After 300 s"
    # A minute's leeway for a loaded machine's stalls between the answer and this check.
    assert retry_after_rows(NAME).filter(
        ends_at__gt=db_now_plus(240), ends_at__lte=db_now_plus(300)
    )
    assert len(lookups(ledger)) == 1
    # Until it ends nobody asks: the dispatchers' settlement, a person's reconcile, a delivery.
    settle_uncertain(destination=destination)
    assert a_person_asks(handoff, destination) == S.UNCERTAIN
    waiting = HandoffFactory(number=43, destination=NAME)
    assert dispatch_batch(destination=destination).claimed == 0
    assert len(lookups(ledger)) == 1
    assert [c["key"] for c in ledger.creates()] == [KEY]
    # Its end passed: settlement asks again and settles; the waiting handoff is delivered.
    ledger.faults(lookups_refused=None)
    retry_after_rows(NAME).update(ends_at=db_now_plus(-1))
    assert settle_uncertain(destination=destination) == {S.DELIVERED: 1}
    dispatch_batch(destination=destination)
    assert Handoff.objects.get(pk=waiting.pk).state == S.DELIVERED


def test_a_lookups_retry_after_is_capped_as_a_deliverys(ledger, destination, settings):  # noqa: F811
    settings.HANDOFF_DESTINATION_MAX_HOLD_SECONDS = 600
    uncertain_42(ledger, destination)
    ledger.faults(lookups_refused=[429, "86400"])

    settle_uncertain(destination=destination)
    assert retry_after_rows(NAME).filter(
        ends_at__gt=db_now_plus(540), ends_at__lte=db_now_plus(600)
    )


def test_a_token_endpoints_retry_after_on_a_lookup_holds_the_destination(servers):  # noqa: F811
    token_server, api = servers
    lookup = {"path": "/v1/records/{key}", "id": "record.id", "key": "record.key"}
    crm = destination_from_config(
        {**config(api, oauth2_auth(token_server)), "lookup": lookup, "replays_same_key": False}
    )
    token_server.faults(rate_limited=300)
    handoff = HandoffFactory(destination="crm", state=S.UNCERTAIN)
    try:
        # Refused by its token endpoint (the API not called), then by the hold: neither asked, nothing recorded.
        assert settle_uncertain(destination=crm) == {}
        assert settle_uncertain(destination=crm) == {}
    finally:
        crm.close()

    [hold] = retry_after_rows("crm")
    assert hold.reason == "the token endpoint's HTTP 429 with Retry-After 300 s"
    assert retry_after_rows("crm").filter(
        ends_at__gt=db_now_plus(240), ends_at__lte=db_now_plus(300)
    )
    assert Handoff.objects.get(pk=handoff.pk).state == S.UNCERTAIN
    assert len(token_server.state()["requests"]) == 1
    assert api.state()["requests"] == []


def test_a_probes_answer_asking_to_wait_holds_the_destination_and_the_next_probe_is_refused(
    ledger,  # noqa: F811
    tmp_path,
):
    """`manage.py destinations probe` (and the console's "Run the whole contract") hears the destination's
    Retry-After as a delivery or a lookup does: the same hold, so that nothing asks it again before the end."""
    applied(ledger, tmp_path)
    ledger.faults(lookups_refused=[429, "300"])

    report = destination_probe(name=NAME, actor_label="a person", key="probe:1")
    parts = {part.name: part for part in report.parts}
    assert parts["create"].verdict == "ok"
    assert parts["lookup"].verdict == "failed" and "HTTP 429" in parts["lookup"].evidence
    [hold] = retry_after_rows(NAME)
    assert hold.reason == "HTTP 429 with Retry-After 300 s"
    assert retry_after_rows(NAME).filter(
        ends_at__gt=db_now_plus(240), ends_at__lte=db_now_plus(300)
    )
    with pytest.raises(ProbeHeld):
        destination_probe(name=NAME, actor_label="a person", key="probe:2")
    assert len(lookups(ledger)) == 1


def test_a_lookup_refused_by_a_hold_that_outlasts_its_wait_fails_at_once(
    ledger,  # noqa: F811
    destination,  # noqa: F811
    django_user_model,
    tmp_path,
):
    """A pause meets a lookup: a caller that may wait 30 s for a permit (a reconciliation run, a replay
    preview's every request) waited them all out in steps of a second for a hold that still holds after
    them. It is refused at once, naming the hold; a hold that ends within the wait is still waited out."""
    applied(ledger, tmp_path)
    handoff = uncertain_42(ledger, destination)
    olga = django_user_model.objects.create(username="olga")
    destination_pause_by_operator(name=NAME, actor=olga, reason="ledger upgrade")
    asked = lookups_under_limits(destination, worker="a run", wait_seconds=30)
    started = time.monotonic()
    with pytest.raises(DestinationBusy, match=r"held \(Paused by an operator\)"):
        asked.lookup(KEY)
    assert time.monotonic() - started < 15, "refused without waiting the 30 s out"
    assert lookups(ledger) == []

    destination_resume_by_operator(name=NAME, actor=olga, reason="upgrade done")
    retry_after_hold(NAME, 2, "HTTP 429 with Retry-After 2 s")
    assert asked.lookup(KEY).action_key == handoff.action_key
    assert len(lookups(ledger)) == 1
