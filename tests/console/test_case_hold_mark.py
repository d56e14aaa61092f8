"""A held handoff says so on the handoff list (issue 39, "Hold one case"): "held (case hold: <reason>, since
<time>)" on its row, from the list's own query: the page runs as many queries with three held rows as with
one; the handoff page's hold line says what sends a held handoff."""

import html

import pytest
from django.contrib.messages import get_messages
from django.db import connection
from django.test.utils import CaptureQueriesContext

from outbox.destinations import InProcessDestination
from outbox.dispatch.dispatcher import handoff_deliver, settle_uncertain_pass
from outbox.models import CaseHold, FailureClass, Handoff, HandoffState
from outbox.services.case_holds import case_hold, case_resume
from outbox.services.operator import handoff_retry
from tests.builders import record
from tests.console.clients import HTMX, client_for, row_of
from tests.factories import HandoffFactory

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


def _list(client) -> tuple[str, int]:
    with CaptureQueriesContext(connection) as queries:
        response = client.get("/handoffs/")
    assert response.status_code == 200
    return response.content.decode(), len(queries)


def test_a_held_handoff_is_marked_on_the_list_with_its_reason_and_since_when(world):
    held, other = record(501), record(502)
    hold = case_hold(
        handoff_id=held.pk, actor=world["olga"], reason="calling ACME", whole_case=False
    )
    since = CaseHold.objects.get(pk=hold.pk).created_at
    page, _ = _list(client_for(world["olga"]))

    assert f"held (case hold: calling ACME, since {since:%H:%M} UTC)" in row_of(
        page, f"handoff-{held.pk}"
    )
    assert "case hold" not in row_of(page, f"handoff-{other.pk}")

    case_resume(handoff_id=held.pk, actor=world["olga"], reason="called back")
    page, _ = _list(client_for(world["olga"]))
    assert "case hold" not in row_of(page, f"handoff-{held.pk}")


def test_the_marks_come_from_the_lists_query_not_one_query_per_row(world):
    rows = [record(n) for n in (511, 512, 513)]
    client = client_for(world["olga"])
    case_hold(handoff_id=rows[0].pk, actor=world["olga"], reason="first", whole_case=False)
    client.get("/handoffs/")  # warm: sessions, the rate limiter's first row
    page, one_held = _list(client)
    assert "held (case hold: first" in row_of(page, f"handoff-{rows[0].pk}")

    for row, reason in zip(rows[1:], ("second", "third"), strict=True):
        case_hold(handoff_id=row.pk, actor=world["olga"], reason=reason, whole_case=False)
    page, three_held = _list(client)

    assert "held (case hold: third" in row_of(page, f"handoff-{rows[2].pk}")
    assert three_held == one_held


def test_a_held_case_is_marked_on_home_and_keeps_its_mark_after_a_quick_action_on_its_row(
    world, rejected
):
    """Home's rows and a row re-rendered after its quick action were prepared apart from the list's: the
    held mark was missing on both (and Home's actions ignored the destination's holds)."""
    case_hold(handoff_id=rejected.pk, actor=world["olga"], reason="calling ACME", whole_case=False)
    olga = client_for(world["olga"])

    home = olga.get("/").content.decode()
    assert "held (case hold: calling ACME" in row_of(home, f"handoff-{rejected.pk}")

    row = olga.post(
        f"/handoffs/{rejected.pk}/acknowledge", {"render": "row"}, **HTMX
    ).content.decode()
    assert "Acknowledged by olga" in row
    assert "held (case hold: calling ACME" in row


def _hold_line(client, handoff) -> str:
    page = client.get(f"/handoffs/{handoff.pk}/").content.decode()
    start = page.index('id="case-hold"')
    return html.unescape(page[start : page.index("</dd>", start)])


def test_a_held_handoff_that_needs_a_person_is_not_said_to_be_sent_when_resumed(world):
    """Hold one case x needs attention: the handoff page's hold line said "it is sent once an operator
    resumes it" of a held handoff needing attention, which the resume does not send (only a retry does).
    It says what sends it; once retried while held, it is sent at the release."""
    failed = HandoffFactory(
        number=506, state=HandoffState.NEEDS_ATTENTION, failure_class=FailureClass.PERMANENT
    )
    case_hold(handoff_id=failed.pk, actor=world["olga"], reason="calling ACME", whole_case=False)
    olga = client_for(world["olga"])

    line = _hold_line(olga, failed)
    assert "is held by olga" in line and "calling ACME" in line
    assert "it is sent once an operator resumes it" not in line
    assert (
        "it waits for an operator's decision; a retry is sent once an operator resumes it" in line
    )

    handoff_retry(handoff_id=failed.pk, actor=world["olga"], reason="fixed the payload")
    assert Handoff.objects.get(pk=failed.pk).state == HandoffState.PENDING
    assert "it is sent once an operator resumes it, under the same key" in _hold_line(olga, failed)


def test_a_held_uncertain_handoff_is_said_to_be_settled_by_a_lookup_not_sent_at_the_resume(world):
    """Hold one case x settlement: a held uncertain handoff's page said "it is sent once an operator resumes
    it", but a lookup at its receiver settles it while held (it sends nothing), and once found it is
    delivered: nothing is left to send. The hold line says so; once the real settlement pass found the task,
    no screen calls it held."""
    handoff = record(521)
    lost = InProcessDestination(lose_ack_for={handoff.action_key})
    assert handoff_deliver(handoff_id=handoff.pk, destination=lost) == HandoffState.UNCERTAIN
    case_hold(handoff_id=handoff.pk, actor=world["olga"], reason="calling ACME", whole_case=False)
    olga = client_for(world["olga"])

    line = _hold_line(olga, handoff)
    assert "is held by olga" in line
    assert "it is sent once an operator resumes it, under" not in line
    assert "a lookup at its receiver settles it, held or not" in line
    assert "only if the receiver has no task for its key" in line

    assert settle_uncertain_pass(destination=InProcessDestination(), limit=10, worker="s").outcomes
    assert Handoff.objects.get(pk=handoff.pk).state == HandoffState.DELIVERED
    page = olga.get(f"/handoffs/{handoff.pk}/").content.decode()
    assert 'id="case-hold"' not in page and "resumes it" not in page
    listed, _ = _list(olga)
    assert "case hold" not in row_of(listed, f"handoff-{handoff.pk}")


def test_resuming_a_held_uncertain_handoff_says_a_lookup_settles_it(world):
    handoff = record(522)
    lost = InProcessDestination(lose_ack_for={handoff.action_key})
    assert handoff_deliver(handoff_id=handoff.pk, destination=lost) == HandoffState.UNCERTAIN
    case_hold(handoff_id=handoff.pk, actor=world["olga"], reason="calling ACME", whole_case=False)
    response = client_for(world["olga"]).post(f"/handoffs/{handoff.pk}/resume", {})
    [message] = [str(m) for m in get_messages(response.wsgi_request)]
    assert "What is left of it is sent" not in message
    assert message == (
        f"Resumed: {handoff.action_key}. {handoff.action_key}: its outcome is unknown: a lookup at its "
        "receiver settles it, held or not (a lookup sends nothing); it is sent now only if the receiver "
        "has no task for its key."
    )
