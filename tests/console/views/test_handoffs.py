"""Handoff list and detail: filters, keyset pages, pinned query counts, what each row and panel shows."""

import re
from datetime import timedelta
from html.parser import HTMLParser

import pytest
from django.utils import timezone

from outbox.models import Attempt, FailureClass, Handoff, HandoffState
from tests.builders import approve
from tests.console.clients import HTMX, client_for
from tests.factories import HandoffFactory

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


def listed(response) -> list[str]:
    return [h.action_key for h in response.context["handoffs"]]


class _RowCells(HTMLParser):
    """Text of each cell of the table row with a given id, whitespace collapsed."""

    def __init__(self, row_id: str):
        super().__init__()
        self.row_id, self.in_row, self.cell, self.cells = row_id, False, None, []

    def handle_starttag(self, tag, attrs):
        if tag == "tr" and dict(attrs).get("id") == self.row_id:
            self.in_row = True
        elif tag == "td" and self.in_row:
            self.cell = []

    def handle_endtag(self, tag):
        if tag == "td" and self.in_row and self.cell is not None:
            self.cells.append(" ".join("".join(self.cell).split()))
            self.cell = None
        elif tag == "tr" and self.in_row:
            self.in_row = False

    def handle_data(self, data):
        if self.cell is not None:
            self.cell.append(data)


def row_cells(body: str, handoff) -> dict[str, str]:
    parser = _RowCells(f"handoff-{handoff.pk}")
    parser.feed(body)
    columns = ("key", "state", "attempts", "failure", "destination", "age", "owner", "actions")
    assert len(parser.cells) == len(columns), parser.cells
    return dict(zip(columns, parser.cells, strict=True))


def test_row_shows_key_state_attempts_failure_destination_and_age(world, rejected):
    from outbox.dispatch.dispatcher import handoff_deliver

    delivered = approve(world)
    handoff_deliver(handoff_id=delivered.pk)
    delivered.refresh_from_db()
    assert delivered.state == HandoffState.DELIVERED and delivered.destination_id
    Handoff.objects.filter(pk=rejected.pk).update(
        attempts=3, created_at=timezone.now() - timedelta(hours=2)
    )
    response = client_for(world["olga"]).get("/handoffs/")
    assert response.status_code == 200
    body = response.content.decode()

    rejected_row = row_cells(body, rejected)
    assert rejected_row["key"] == "onboarding:7:50:1 workspace 7 · request 50 revision 1"
    assert rejected_row["state"] == "Needs attention"
    assert rejected_row["attempts"] == "3"
    assert rejected_row["failure"] == "Permanent: payload_invalid"
    assert rejected_row["destination"] == "—", "a rejected handoff has no task at the receiver"
    assert rejected_row["age"] == "2 hours"

    delivered_row = row_cells(body, delivered)
    assert delivered_row["state"] == "Delivered"
    assert delivered_row["attempts"] == "1"
    assert delivered_row["destination"] == delivered.destination_id
    assert delivered_row["age"] == "—", "a delivered handoff is not pending"


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"state": "needs_attention"}, ["onboarding:7:50:1"]),
        ({"state": "uncertain"}, ["onboarding:7:42:1"]),
        ({"state": "attention"}, ["onboarding:7:50:1", "onboarding:7:42:1"]),
        ({"failure_class": "permanent"}, ["onboarding:7:50:1"]),
        ({"q": "50"}, ["onboarding:7:50:1"]),
        ({"q": "7:42"}, ["onboarding:7:42:1"]),
        ({"reason_code": "payload_invalid"}, ["onboarding:7:50:1"]),
        # Not request numbers (int() refuses them): searched for as text, never a 500.
        ({"q": "9" * 5000}, []),
        ({"q": "\u0664\u0662"}, []),
        ({"workspace": "7", "state": "delivered"}, []),
        ({"owner": "nobody"}, []),
        ({"age": "1h"}, []),
    ],
)
def test_filters(world, rejected, uncertain, params, expected):
    response = client_for(world["olga"]).get("/handoffs/", params)
    assert sorted(listed(response)) == sorted(expected)


def test_owner_filter_me_and_named_operator(world, rejected, uncertain):
    Handoff.objects.filter(pk=rejected.pk).update(owner=world["oscar"])
    assert listed(client_for(world["oscar"]).get("/handoffs/", {"owner": "me"})) == [
        "onboarding:7:50:1"
    ]
    assert listed(
        client_for(world["olga"]).get("/handoffs/", {"owner": str(world["olga"].pk)})
    ) == ["onboarding:7:42:1"]


def test_age_filter_keeps_old_ones(world, rejected, uncertain):
    Handoff.objects.filter(pk=rejected.pk).update(created_at=timezone.now() - timedelta(days=2))
    assert listed(client_for(world["olga"]).get("/handoffs/", {"age": "1d"})) == [
        "onboarding:7:50:1"
    ]


def test_retrying_filter_shows_only_handoffs_waiting_in_backoff(world, pending):
    HandoffFactory(
        state=HandoffState.PENDING,
        attempts=2,
        next_attempt_at=timezone.now() + timedelta(minutes=5),
        failure_class=FailureClass.TRANSIENT,
        reason_code="http_503",
    )
    response = client_for(world["olga"]).get("/handoffs/", {"state": "retrying"})
    assert len(listed(response)) == 1 and listed(response)[0] != pending.action_key
    assert "Transient: http_503" in response.content.decode()


def test_list_never_shows_other_workspaces(world, foreign, pending):
    assert listed(client_for(world["olga"]).get("/handoffs/")) == [pending.action_key]
    assert listed(client_for(world["olga"]).get("/handoffs/", {"workspace": "8"})) == [
        pending.action_key
    ]


def test_keyset_pages_walk_every_row_once_even_with_equal_timestamps(world):
    HandoffFactory.create_batch(120, state=HandoffState.NEEDS_ATTENTION)
    same = timezone.now() - timedelta(minutes=1)
    Handoff.objects.filter(
        pk__in=list(Handoff.objects.order_by("id").values_list("id", flat=True)[40:70])
    ).update(created_at=same)
    client = client_for(world["olga"])
    seen, url, pages = [], "/handoffs/", 0
    while url:
        response = client.get(url if url.startswith("/") else "/handoffs/" + url)
        seen += listed(response)
        url = response.context["next_url"]
        pages += 1
    assert pages == 3
    assert len(seen) == len(set(seen)) == 120


def test_list_is_paged_by_keyset_without_count(world):
    HandoffFactory.create_batch(60, state=HandoffState.NEEDS_ATTENTION)
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        response = client_for(world["olga"]).get("/handoffs/")
    assert response.status_code == 200
    assert len(listed(response)) == 50 and response.context["next_url"], (
        "a full first page and a link on"
    )
    # The one count over handoffs is the header's, and it is bounded: each part stops at a LIMIT.
    assert not [
        q
        for q in queries.captured_queries
        if "COUNT(" in q["sql"].upper()
        and "handoff" in q["sql"].lower()
        and "LIMIT" not in q["sql"].upper()
    ]


@pytest.mark.parametrize("rows", [3, 80])
def test_list_query_count_is_pinned_and_does_not_grow(world, rows, django_assert_max_num_queries):
    HandoffFactory.create_batch(rows, state=HandoffState.NEEDS_ATTENTION)
    client = client_for(world["olga"])
    # Two of them say what the rows' states do not: their destinations' holds and their keys' live findings.
    # One reads the operators for both the owner filter and the assign menu (14 and 10 when each read its own).
    with django_assert_max_num_queries(13):
        full = client.get("/handoffs/", {"state": "needs_attention"})
    assert len(listed(full)) == min(rows, 50)
    with django_assert_max_num_queries(9):
        partial = client.get("/handoffs/", {"state": "needs_attention"}, **HTMX)
    assert partial.status_code == 200
    assert partial.content.decode().lstrip().startswith('<section id="handoff-results">')
    # The partial is rendered without a context to inspect: compare the rows it holds.
    assert re.findall(r'<tr id="handoff-(\d+)">', partial.content.decode()) == [
        str(h.pk) for h in full.context["handoffs"]
    ]


def test_htmx_filter_returns_the_results_region_only(world, pending):
    response = client_for(world["olga"]).get("/handoffs/", {"state": "pending"}, **HTMX)
    body = response.content.decode()
    assert body.lstrip().startswith('<section id="handoff-results">')
    assert "<html" not in body and pending.action_key in body


def test_detail_shows_timeline_history_redacted_payload_owner_sla_and_next_step(world, rejected):
    response = client_for(world["olga"]).get(f"/handoffs/{rejected.pk}/")
    body = response.content.decode()
    attempt = Attempt.objects.get(handoff=rejected)
    assert attempt.worker in body and "Failed" in body and "422" in body
    assert "payload_invalid" in body
    assert "approved; handoff recorded" in body and "claimed for attempt 1" in body
    assert "onboarding@northwind.example" not in body and "[redacted]" in body
    assert "olga" in body and "due" in body
    assert "The receiver rejected the content: correct it." in body
    assert "mode: live" in body
    assert "Correct the request" in body


def test_detail_for_an_approver_shows_no_actions(world, rejected):
    body = client_for(world["alice"]).get(f"/handoffs/{rejected.pk}/").content.decode()
    assert "onboarding:7:50:1" in body
    assert 'id="handoff-actions"' not in body
    assert "need the operator role" in body


def test_detail_polls_while_pending_and_answers_204_when_nothing_changed(world, pending):
    client = client_for(world["olga"])
    page = client.get(f"/handoffs/{pending.pk}/")
    version = page.context["version"]
    assert 'hx-trigger="every 2s"' in page.content.decode()
    assert client.get(f"/handoffs/{pending.pk}/", {"since": version}, **HTMX).status_code == 204
    from outbox.dispatch.dispatcher import handoff_deliver

    handoff_deliver(handoff_id=pending.pk)
    changed = client.get(f"/handoffs/{pending.pk}/", {"since": version}, **HTMX)
    assert changed.status_code == 200
    assert b'data-state="delivered"' in changed.content
    assert b"every 2s" not in changed.content


def test_rows_offer_quick_actions_to_operators_only(world, rejected, uncertain):
    olga = client_for(world["olga"]).get("/handoffs/").content.decode()
    assert f'hx-post="/handoffs/{rejected.pk}/acknowledge"' in olga
    assert f'hx-post="/handoffs/{rejected.pk}/retry"' not in olga, (
        "a permanent rejection is refused the same way when sent again: no Retry"
    )
    assert f'hx-post="/handoffs/{uncertain.pk}/reconcile"' in olga
    assert f'hx-post="/handoffs/{uncertain.pk}/retry"' not in olga, (
        "a risky retry is never one click from the list"
    )
    alice = client_for(world["alice"]).get("/handoffs/").content.decode()
    assert 'hx-post="/handoffs/' not in alice.split('id="bulk-panel"')[0]
    assert 'id="bulk-panel"' not in alice


def test_home_draws_the_lists_own_row_with_its_quick_actions(world, rejected):
    """One row template: the home page's handoffs that need a person are the list's rows (its own
    table drew fewer columns and no actions)."""
    home = client_for(world["olga"]).get("/").content.decode()
    assert f'id="handoff-{rejected.pk}"' in home
    assert f'hx-post="/handoffs/{rejected.pk}/acknowledge"' in home
    assert home.count('<th scope="col">Owner</th>') == 1


def test_every_quick_action_posts_to_a_handoff_action_view():
    """A row's buttons post to named URLs: a renamed URL fails here instead of posting to a 404."""
    from django.urls import resolve, reverse

    from console.views.handoff_list import QUICK_ACTION_URLS

    for action, (_label, url_name) in QUICK_ACTION_URLS.items():
        match = resolve(reverse(url_name, args=(7,)))
        assert match.func.__module__ == "console.views.handoff_actions", action
        assert match.kwargs == {"pk": 7}


def test_the_handoff_page_never_shows_a_configured_secret_typed_into_a_payload(world):
    from django.conf import settings

    handoff = HandoffFactory(
        number=1, workspace_id=7, payload={"client_name": "N", "notes": settings.METRICS_TOKEN}
    )
    page = client_for(world["olga"]).get(f"/handoffs/{handoff.pk}/")
    assert page.status_code == 200
    assert settings.METRICS_TOKEN.encode() not in page.content
