"""The Destinations page and one destination's page: what an operator sees (only their workspaces'
counts), who may pause, resume or schedule a window (the destination permission), refusals that write
nothing, the connection test, and the handoff list filtered by destination."""

from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connections
from django.test.utils import CaptureQueriesContext
from django.utils.html import escape

from outbox.destinations.registry import describe_contract, destination_named
from outbox.models import (
    DestinationConfig,
    DestinationEvent,
    DestinationHealth,
    DestinationHold,
    HandoffState,
)
from outbox.services.destination_windows import destination_pause_by_operator
from tests.console.clients import client_for
from tests.factories import (
    HandoffFactory,
    grant_destination_admin,
    pause_by_breaker,
    paused_by_breaker,
)

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


@pytest.fixture
def crm(world):
    DestinationConfig.objects.create(name="crm", kind="in_process", config={})
    return "crm"


def test_operators_see_each_destination_with_their_own_workspaces_counts(world, crm):
    HandoffFactory(number=1, workspace_id=7, destination="crm")
    HandoffFactory(number=2, workspace_id=8, destination="crm")
    page = client_for(world["olga"]).get("/destinations/")
    assert page.status_code == 200
    rows = {d.name: d for d in page.context["destinations"]}
    assert set(rows) == {"receiver", "crm"}
    assert (rows["crm"].summary.queued, rows["crm"].kind) == (1, "in_process")
    assert rows["crm"].summary.state_words == "active"


def test_requesters_and_strangers_are_refused(world, crm):
    assert client_for(world["bob"]).get("/destinations/").status_code == 403
    assert client_for(world["olga"]).get("/destinations/nowhere/").status_code == 404


def test_pausing_needs_the_destination_permission_and_writes_nothing_without_it(world, crm):
    refused = client_for(world["olga"]).post("/destinations/crm/pause", {"reason": "upgrade"})
    assert refused.status_code == 403
    assert not DestinationEvent.objects.exists()
    assert not DestinationHold.objects.exists()


def test_an_admin_pauses_then_resumes_and_the_page_says_so(world, crm):
    olga = client_for(grant_destination_admin(world["olga"]))
    assert olga.post("/destinations/crm/pause", {"reason": "crm upgrade"}).status_code == 302
    page = olga.get("/destinations/crm/")
    words = page.context["destination"].summary.state_words
    assert words.startswith("Paused by an operator: crm upgrade · since ")
    assert words.endswith(" · until an operator resumes it · set by olga")
    assert words == page.context["holds"].text
    assert olga.post("/destinations/crm/resume", {"reason": "done"}).status_code == 302
    assert olga.get("/destinations/crm/").context["destination"].summary.state_words == "active"
    assert list(DestinationEvent.objects.order_by("at", "id").values_list("action", flat=True)) == [
        "operator_pause",
        "operator_resume",
    ]


@pytest.mark.parametrize(
    "path, data",
    [
        ("pause", {"reason": ""}),
        ("pause", {"reason": "x", "minutes": "²"}),
        ("window", {"reason": "x", "starts_at": "2099-01-01 11:00", "ends_at": "2099-01-01 10:00"}),
        ("resume", {"reason": "nothing to resume"}),
    ],
)
def test_bad_input_is_422_with_its_reason_and_writes_nothing(world, crm, path, data):
    olga = client_for(grant_destination_admin(world["olga"]))
    refused = olga.post(f"/destinations/crm/{path}", data)
    assert refused.status_code == 422
    assert b"Not " in refused.content
    assert not DestinationEvent.objects.exists()


def test_a_window_is_scheduled_and_shown(world, crm):
    olga = client_for(grant_destination_admin(world["olga"]))
    data = {"reason": "db upgrade", "starts_at": "2099-01-01 10:00", "ends_at": "2099-01-01 11:00"}
    assert olga.post("/destinations/crm/window", data).status_code == 302
    words = olga.get("/destinations/crm/").context["destination"].summary.state_words
    assert words == (
        "next: Maintenance window: db upgrade · since 2099-01-01 10:00:00 UTC · "
        "until 2099-01-01 11:00:00 UTC · set by olga"
    )


def test_the_connection_test_asks_the_destination_and_creates_nothing(world, crm):
    olga = client_for(grant_destination_admin(world["olga"]))
    assert b"Test connection" in olga.get("/destinations/crm/").content
    answer = olga.post("/destinations/crm/test", follow=True)
    assert b"Reachable" in answer.content


def test_a_connection_test_without_the_destination_permission_is_403_and_has_no_button(world, crm):
    olga = client_for(world["olga"])
    assert b"Test connection" not in olga.get("/destinations/crm/").content
    refused = olga.post("/destinations/crm/test")
    assert refused.status_code == 403
    assert b"set destination limits" in refused.content
    assert not DestinationHealth.objects.filter(connection_tested_at__isnull=False).exists()


def test_a_disabled_destination_is_not_tested_and_the_answer_says_why(world):
    DestinationConfig.objects.create(name="old-crm", kind="in_process", config={}, enabled=False)
    olga = client_for(grant_destination_admin(world["olga"]))
    assert b"Test connection" not in olga.get("/destinations/old-crm/").content
    refused = olga.post("/destinations/old-crm/test")
    assert refused.status_code == 409
    assert b"Not tested: destination &#x27;old-crm&#x27; is disabled" in refused.content
    assert not DestinationHealth.objects.filter(connection_tested_at__isnull=False).exists()


def test_a_second_test_within_ten_seconds_is_429_with_retry_after_whoever_asks(world, crm):
    """The turn is the destination's, not the person's: another admin, in another session, waits too."""
    olga = client_for(grant_destination_admin(world["olga"]))
    oscar = client_for(grant_destination_admin(world["oscar"]))
    assert olga.post("/destinations/crm/test").status_code == 302
    refused = oscar.post("/destinations/crm/test")
    assert refused.status_code == 429
    retry_after = int(refused["Retry-After"])
    assert 1 <= retry_after <= 10
    assert f"try again in {retry_after} second".encode() in refused.content
    assert olga.post("/destinations/crm/test").status_code == 429


def test_the_turn_comes_back_ten_seconds_after_the_last_test(world, crm):
    from outbox.clock import db_now_plus

    olga = client_for(grant_destination_admin(world["olga"]))
    assert olga.post("/destinations/crm/test").status_code == 302
    DestinationHealth.objects.filter(name="crm").update(connection_tested_at=db_now_plus(-10.5))
    answer = olga.post("/destinations/crm/test", follow=True)
    assert b"Reachable" in answer.content


def test_the_handoff_list_filters_by_destination(world, crm):
    HandoffFactory(number=1, workspace_id=7, destination="crm")
    HandoffFactory(number=2, workspace_id=7)
    listed = client_for(world["olga"]).get("/handoffs/", {"destination": "crm"})
    assert [h.destination for h in listed.context["handoffs"]] == ["crm"]
    assert all(h.state == HandoffState.PENDING for h in listed.context["handoffs"])


def test_a_destination_paused_by_its_breaker_is_asked_at_once_from_its_page_and_resumes(world, crm):
    pause_by_breaker("crm", next_probe_in=600)
    olga = client_for(grant_destination_admin(world["olga"]))
    assert b"Probe now" in olga.get("/destinations/crm/").content
    answer = olga.post("/destinations/crm/resume", {"reason": "token fixed"}, follow=True)
    # The resume asked the destination (a lookup that creates nothing): it answered, so it is active now,
    # ten minutes before its scheduled probe.
    assert b"crm resumed" in answer.content
    assert not paused_by_breaker("crm")


def test_a_destination_that_does_not_answer_the_resume_is_probed_with_the_next_claim(
    world, refused_port
):
    from outbox.clock import db_now_plus

    # Nothing listens on this port: the resume's lookup is refused.
    url = f"http://127.0.0.1:{refused_port}/delivery/api"
    DestinationConfig.objects.create(name="down", kind="http", config={"url": url})
    pause_by_breaker("down", next_probe_in=600)
    olga = client_for(grant_destination_admin(world["olga"]))
    answer = olga.post("/destinations/down/resume", {"reason": "restarted"}, follow=True)
    assert b"did not answer yet" in answer.content
    # The next claim is the probe: due now on the database clock, the breaker still paused until it succeeds.
    assert paused_by_breaker("down")
    assert DestinationHealth.objects.filter(name="down", next_probe_at__lte=db_now_plus(0)).exists()


def test_a_destination_the_dispatcher_cannot_serve_is_shown_held_with_its_reason(world):
    DestinationConfig.objects.create(
        name="acme",
        kind="http",
        config={"url": "http://127.0.0.1:9/x", "secret_env": "HANDOFF_DEST_ACME_NOT_HERE"},
    )
    call_command("dispatch", "--once", stdout=StringIO(), stderr=StringIO())
    olga = client_for(world["olga"])
    rows = {d.name: d for d in olga.get("/destinations/").context["destinations"]}
    words = rows["acme"].summary.state_words
    assert words.startswith("Cannot be served: destination 'acme'")
    assert "HANDOFF_DEST_ACME_NOT_HERE" in words
    assert words.endswith(" · until a dispatcher can serve it · set by a dispatcher")
    assert rows["receiver"].summary.state_words == "active"
    page = olga.get("/destinations/acme/")
    assert page.context["destination"].summary.state_words == words
    assert b"HANDOFF_DEST_ACME_NOT_HERE is not set" in page.content


def _row_html(page, name: str) -> str:
    html = page.content.decode()
    start = html.index(f'<tr id="destination-{name}">')
    return html[start : html.index("</tr>", start)]


def test_the_list_words_every_hold_and_the_next_as_the_destination_page_does(world, crm):
    """An operator's pause, a live window and a window scheduled later: the list's row names all three, in
    the very strings of the destination's own page (outbox/hold_lines.py)."""
    olga = client_for(grant_destination_admin(world["olga"]))
    assert olga.post("/destinations/crm/pause", {"reason": "crm upgrade"}).status_code == 302
    live = {"reason": "db move", "starts_at": "2020-01-01 00:00", "ends_at": "2099-01-01 00:00"}
    assert olga.post("/destinations/crm/window", live).status_code == 302
    later = {
        "reason": "next upgrade",
        "starts_at": "2099-02-01 10:00",
        "ends_at": "2099-02-01 11:00",
    }
    assert olga.post("/destinations/crm/window", later).status_code == 302

    own = olga.get("/destinations/crm/")
    holds = own.context["holds"]
    assert [line.reason for line in holds.live] == ["db move", "crm upgrade"]
    assert holds.next_scheduled.reason == "next upgrade"
    listed = olga.get("/destinations/")
    row = _row_html(listed, "crm")
    for line in holds.live:
        assert (
            f'<li class="hold" data-hold-kind="{escape(line.kind)}">{escape(line.words)}</li>'
            in row
        )
    assert f'<li class="hold-next">Next: {escape(holds.next_scheduled.words)}</li>' in row
    summary = {d.name: d for d in listed.context["destinations"]}["crm"].summary
    assert summary.state_words == own.context["destination"].summary.state_words == holds.text
    assert summary.state_kind == "window"
    assert "active" not in _row_html(listed, "crm")


def _queries_of(client, path: str) -> int:
    with (
        CaptureQueriesContext(connections["default"]) as default,
        CaptureQueriesContext(connections["delivery"]) as delivery,
    ):
        assert client.get(path).status_code == 200
    return len(default) + len(delivery)


def test_the_list_reads_every_destinations_holds_in_one_query(world, crm):
    for name in ("erp", "mail"):
        DestinationConfig.objects.create(name=name, kind="in_process", config={})
    olga = client_for(world["olga"])
    destination_pause_by_operator(name="crm", actor=world["olga"], reason="upgrade")
    olga.get("/destinations/")
    one_held = _queries_of(olga, "/destinations/")
    for name in ("erp", "mail"):
        destination_pause_by_operator(name=name, actor=world["olga"], reason="upgrade")
    three_held = _queries_of(olga, "/destinations/")
    assert three_held == one_held
    rows = {d.name: d for d in olga.get("/destinations/").context["destinations"]}
    assert all(rows[n].summary.holds.held for n in ("crm", "erp", "mail"))


def test_the_list_reads_the_destinations_rows_once_and_words_each_contract(world, crm):
    """Each destination's contract comes from the row the page read: no read of its row a destination (issue
    40), and the words are those of the destination as the dispatchers build it (`destination_named`)."""
    olga = client_for(world["olga"])
    few = _queries_of(olga, "/destinations/")
    DestinationConfig.objects.create(
        name="erp", kind="http", config={"url": "http://127.0.0.1:9/erp", "read_timeout": 7}
    )
    DestinationConfig.objects.create(name="mail", kind="in_process", config={})
    DestinationConfig.objects.create(name="old", kind="in_process", config={}, enabled=False)
    olga.get("/destinations/")
    assert _queries_of(olga, "/destinations/") == few
    rows = {d.name: d for d in olga.get("/destinations/").context["destinations"]}
    for name in ("crm", "erp", "mail", "receiver"):
        assert rows[name].contract == describe_contract(destination_named(name)), name
        assert rows[name].problem == ""
    assert rows["old"].problem == "disabled: the dispatchers do not serve it"
