"""The console's list and detail pages run as many queries with 50 handoffs as with 5: no query per row, per
owner, per attempt or per event, and no count that reads further when more rows match."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from outbox.clock import db_now_plus
from outbox.models import Attempt, AttemptOutcome, FailureClass, Handoff, HandoffEvent, HandoffState
from tests.console.clients import HTMX, client_for
from tests.factories import FindingFactory, HandoffFactory

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
S = HandoffState

LIST_PAGES = {
    "no filter": {},
    "needs attention": {"state": "needs_attention"},
    "needs a person": {"state": "attention"},
    "retrying": {"state": "retrying"},
    "open": {"state": "open"},
    "delivered": {"state": "delivered"},
    "owner me, older than 1 day": {"owner": "me", "age": "1d"},
    "failure class": {"failure_class": "transient"},
    "request number": {"q": "request 100001"},
    "text search": {"q": "Client"},
}


def add_handoffs(world, count: int) -> None:
    """`count` handoffs of workspace 7 in every state the lists filter on, owned by two operators, some of
    them a day old, some with a live finding."""
    owners = (world["olga"], world["oscar"], None)
    for i in range(count):
        kind = i % 5
        if kind == 0:
            h = HandoffFactory(
                state=S.NEEDS_ATTENTION,
                failure_class=FailureClass.TRANSIENT,
                reason_code="retries_exhausted",
                attempts=3,
                owner=owners[i % 3],
            )
        elif kind == 1:
            # Shifted by one so that even five rows hold an old uncertain one of olga's: its advice reads
            # its destination's contract (once a page), which every page then does at 5 rows as at 50.
            h = HandoffFactory(
                state=S.UNCERTAIN,
                failure_class=FailureClass.UNCERTAIN,
                attempts=1,
                owner=owners[(i - 1) % 3],
            )
        elif kind == 2:
            h = HandoffFactory(
                attempts=2,
                failure_class=FailureClass.TRANSIENT,
                reason_code="http_503",
                next_attempt_at=db_now_plus(600),
                owner=owners[i % 3],
            )
        elif kind == 3:
            h = HandoffFactory(
                state=S.DELIVERED, attempts=1, destination_id=f"task-{i}", owner=owners[i % 3]
            )
            FindingFactory(action_key=h.action_key)
        else:
            h = HandoffFactory(owner=owners[i % 3])
        if i % 2:
            Handoff.objects.filter(pk=h.pk).update(created_at=timezone.now() - timedelta(days=2))


def add_timeline(handoff: Handoff, count: int) -> None:
    start = Attempt.objects.filter(handoff=handoff).count()
    now = timezone.now()
    Attempt.objects.bulk_create(
        Attempt(
            handoff=handoff,
            number=start + n + 1,
            fencing_epoch=start + n + 1,
            worker="test:1",
            started_at=now,
            finished_at=now,
            outcome=AttemptOutcome.FAILED,
            failure_class=FailureClass.TRANSIENT,
            reason_code="http_503",
            status_code=503,
            latency_ms=40,
        )
        for n in range(count)
    )
    HandoffEvent.objects.bulk_create(
        HandoffEvent(
            handoff=handoff,
            from_state=S.IN_FLIGHT,
            to_state=S.PENDING,
            actor_label="test:1",
            reason="transient failure (http_503)",
        )
        for _ in range(count)
    )


def queries_of(client, url: str, params: dict | None = None, **headers) -> int:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url, params or {}, **headers)
    assert response.status_code == 200, (url, params, response.status_code)
    return len(captured.captured_queries)


@pytest.mark.parametrize("page", list(LIST_PAGES))
def test_list_runs_the_same_queries_with_5_and_50_handoffs(world, page):
    client = client_for(world["olga"])
    add_handoffs(world, 5)
    few = (
        queries_of(client, "/handoffs/", LIST_PAGES[page]),
        queries_of(client, "/handoffs/", LIST_PAGES[page], **HTMX),
    )
    add_handoffs(world, 45)
    many = (
        queries_of(client, "/handoffs/", LIST_PAGES[page]),
        queries_of(client, "/handoffs/", LIST_PAGES[page], **HTMX),
    )
    assert many == few, (
        f"{page}: full page and htmx results {few} queries with 5 handoffs, {many} with 50"
    )


def test_detail_runs_the_same_queries_with_5_and_50_handoffs_and_timeline_rows(world):
    client = client_for(world["olga"])
    add_handoffs(world, 5)
    shown = HandoffFactory(
        state=S.NEEDS_ATTENTION,
        failure_class=FailureClass.TRANSIENT,
        reason_code="retries_exhausted",
        attempts=5,
        owner=world["oscar"],
    )
    FindingFactory(action_key=shown.action_key)
    add_timeline(shown, 5)
    url = f"/handoffs/{shown.pk}/"
    few = (queries_of(client, url), queries_of(client, url, **HTMX))
    add_handoffs(world, 45)
    add_timeline(shown, 45)
    FindingFactory(action_key=shown.action_key, kind="payload_mismatch")
    many = (queries_of(client, url), queries_of(client, url, **HTMX))
    assert many == few, (
        f"detail and panel: {few} queries with 5 handoffs and attempts, {many} with 50"
    )


# The pages an operator on call opens (bench/console_operators_bench.py) and the queries each may run: its
# user's memberships and its workspaces' names are read once a page (`approvals.selectors.
# memberships_read_once_per_request`), where the view, the list's filter and the nav each read them before.
OPERATOR_PAGES = {
    "home": ("/", {}, 9),
    "list, no filter": ("/handoffs/", {}, 11),
    "list, needs attention": ("/handoffs/", {"state": "needs_attention"}, 10),
    "list, owner me, older than 1 day": ("/handoffs/", {"owner": "me", "age": "1d"}, 11),
    "list, request number": ("/handoffs/", {"q": "request 100001"}, 16),
    "handoff page": ("/handoffs/{pk}/", {}, 18),
    "health": ("/health/", {}, 29),
    "incidents": ("/incidents/", {}, 8),
    "destinations": ("/destinations/", {}, 10),
}


@pytest.mark.parametrize("page", list(OPERATOR_PAGES))
def test_each_page_an_operator_opens_runs_its_pinned_queries(world, page):
    client = client_for(world["olga"])
    add_handoffs(world, 5)
    url, params, pinned = OPERATOR_PAGES[page]
    shown = Handoff.objects.filter(state=S.NEEDS_ATTENTION).first()
    # The page's first request apart: it reads what a session reads once.
    queries_of(client, url.format(pk=shown.pk), params)
    ran = queries_of(client, url.format(pk=shown.pk), params)
    assert ran <= pinned, f"{page}: {ran} queries, pinned at {pinned}"
