"""A waiting handoff's screens say its destination's holds in the destination page's words (issue 36: "every
screen shows the live holds and the next scheduled one"): an operator's pause, a window that started during
it and a window ahead are three lines on the handoff page, on its row of the handoff list and on the
requester's page, each the same string as on `/destinations/<name>/`; the list reads the holds of every row's
destination in one query."""

from datetime import timedelta
from html import unescape

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from outbox.clock import db_now_plus
from outbox.hold_lines import destination_holds_now
from outbox.models import DestinationHold, Handoff
from outbox.services.destination_windows import (
    destination_pause_by_operator,
    destination_schedule_window,
)
from tests.builders import approve
from tests.console.clients import client_for, row_of
from tests.factories import grant_destination_admin

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


@pytest.fixture
def three_holds(world):
    """Request 42 approved (its step pending for `receiver`); `receiver` paused by olga, in a window that
    started during the pause, and with a second window ahead."""
    handoff = approve(world)
    olga = grant_destination_admin(world["olga"])
    now = timezone.now()
    destination_pause_by_operator(name=handoff.destination, actor=olga, reason="crm upgrade")
    window = destination_schedule_window(
        name=handoff.destination,
        actor=olga,
        reason="database maintenance",
        starts_at=now + timedelta(hours=1),
        ends_at=now + timedelta(hours=2),
    )
    DestinationHold.objects.filter(pk=window.pk).update(starts_at=db_now_plus(-1))
    destination_schedule_window(
        name=handoff.destination,
        actor=olga,
        reason="index rebuild",
        starts_at=now + timedelta(days=1),
        ends_at=now + timedelta(days=1, hours=1),
    )
    return handoff


def _words(name: str) -> list[str]:
    holds = destination_holds_now(name)
    assert [line.kind for line in holds.live] == ["Maintenance window", "Paused by an operator"]
    return [line.words for line in holds.live] + [holds.next_scheduled.words]


def _page(client, url: str) -> str:
    answer = client.get(url)
    assert answer.status_code == 200
    return unescape(answer.content.decode())


def test_the_handoff_page_its_list_row_and_the_request_page_list_all_three_holds_as_the_destination_page(
    world, three_holds
):
    handoff = three_holds
    words = _words(handoff.destination)
    olga, bob = client_for(world["olga"]), client_for(world["bob"])
    destination_page = _page(olga, f"/destinations/{handoff.destination}/")
    handoff_page = _page(olga, f"/handoffs/{handoff.pk}/")
    row = row_of(_page(olga, "/handoffs/"), f"handoff-{handoff.pk}")
    request_page = _page(bob, "/approvals/7/42/1/")
    for line in words:
        assert line in destination_page
        assert line in handoff_page, line
        assert line in row, line
        assert line in request_page, line
    # The handoff's advice names the same holds, and the step owner is the operator who set them.
    assert f"Waiting: destination {handoff.destination} is held." in handoff_page
    assert "not sent yet, waiting: " in request_page


def test_the_handoff_list_reads_every_rows_destination_holds_in_one_query(world, three_holds):
    for number in (43, 44, 45):
        approve(world, number=number)
    assert Handoff.objects.filter(workspace_id=7).count() == 4
    olga = client_for(world["olga"])
    with CaptureQueriesContext(connection) as captured:
        page = _page(olga, "/handoffs/")
    assert page.count("Paused by an operator: crm upgrade") == 4
    hold_reads = [q for q in captured.captured_queries if "outbox_destinationhold" in q["sql"]]
    assert len(hold_reads) == 1
