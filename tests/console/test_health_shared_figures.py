"""The health dashboard's figures are computed once per HEALTH_FIGURES_SECONDS for everyone who looks at the
same workspaces, and the page says how old they are (config/settings/operations.py says why). Shared only
within a scope: an operator of another workspace never gets them. On PostgreSQL, the failure figures read
their partial indexes (outbox 0016), not a workspace's whole needs-attention backlog."""

import re

import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext

from approvals.models import Role
from outbox.clock import db_time
from outbox.models import HandoffState
from reconciliation.selectors.health import time_to_acknowledge
from tests.console.clients import client_for
from tests.factories import HandoffFactory, make_user, onboarding_world
from tests.outbox.test_hot_indexes import _fill_delivered, _plan_nodes

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
S = HandoffState


@pytest.fixture
def shared(settings):
    settings.HEALTH_FIGURES_SECONDS = 60
    cache.clear()
    yield
    cache.clear()


def _pending_figure(page: str) -> str:
    """The pending count as the page shows it (the text of its link)."""
    match = re.search(r'id="fig-pending"><a href="[^"]*">(.*?)</a>', page, re.S)
    assert match, "the page shows the pending figure"
    # The figure's words sit in the element that carries its claim (`data-claim`): the text, without tags.
    return re.sub(r"<[^>]+>", "", match.group(1)).strip()


def test_figures_are_shared_for_a_while_and_the_page_says_how_old_they_are(shared):
    world = onboarding_world()
    HandoffFactory(state=S.PENDING)
    olga = client_for(world["olga"])
    first = olga.get("/health/").content.decode()
    HandoffFactory(state=S.PENDING)
    second = olga.get("/health/").content.decode()
    assert _pending_figure(first) == _pending_figure(second), "the figures computed first"
    assert 'id="figures-as-of"' in second and "computed at most every 60 s" in second
    cache.clear()
    third = olga.get("/health/").content.decode()
    assert _pending_figure(third) != _pending_figure(first), "computed again once they expired"


def test_an_operator_of_another_workspace_never_gets_them(shared):
    world = onboarding_world()
    HandoffFactory(state=S.PENDING)  # workspace 7
    otto = make_user("otto", workspace=world["w8"], roles=(Role.OPERATOR,))
    client_for(world["olga"]).get("/health/")
    assert _pending_figure(client_for(world["olga"]).get("/health/").content.decode()) == "1"
    page = client_for(otto).get("/health/").content.decode()
    assert _pending_figure(page) == "0", "workspace 8 has no pending handoff"


def test_without_sharing_every_request_computes_them(settings):
    settings.HEALTH_FIGURES_SECONDS = 0
    world = onboarding_world()
    olga = client_for(world["olga"])
    first = olga.get("/health/").content.decode()
    HandoffFactory(state=S.PENDING)
    second = olga.get("/health/").content.decode()
    assert _pending_figure(first) != _pending_figure(second)
    assert "computed at most every" not in second


@pytest.mark.postgres
@pytest.mark.django_db(databases=["default", "delivery"], transaction=True)
def test_the_acknowledgement_figures_read_their_partial_indexes():
    assert connection.vendor == "postgresql", "plans are PostgreSQL's: run with DATABASE_URL"
    _fill_delivered(5_000)
    now = db_time()
    for n in range(300):
        HandoffFactory(
            number=n + 2,
            state=S.NEEDS_ATTENTION,
            attention_since=now,
            acknowledged_at=now if n % 2 else None,
        )
    with connection.cursor() as cursor:
        # VACUUM as well (committed rows, hence a transactional test): a long-lived outbox's visibility map,
        # without which PostgreSQL would not prefer reading an index alone.
        cursor.execute("VACUUM ANALYZE outbox_handoff")
    with CaptureQueriesContext(connection) as queries:
        time_to_acknowledge([7], now=now)
    indexes = {
        node.get("Index Name", "")
        for q in queries.captured_queries
        for node in _plan_nodes(q["sql"])
    }
    assert {"handoff_acknowledged_idx", "handoff_unacknowledged_idx"} <= indexes, indexes
    # The count and the oldest of the unacknowledged are read from their index alone: the page asks for the
    # workspaces' own handoffs, and an index whose condition lacks the workflow sent PostgreSQL to every row
    # (on the console bench's 1,000,000 handoffs, 45,000 of them unacknowledged: 140-180 ms against 4 ms).
    (waiting,) = [q["sql"] for q in queries.captured_queries if 'COUNT(*) AS "n"' in q["sql"]]
    reads = [
        (node["Node Type"], node.get("Index Name", ""))
        for node in _plan_nodes(waiting)
        if node.get("Relation Name") == "outbox_handoff"
    ]
    assert reads == [("Index Only Scan", "handoff_unacknowledged_idx")], reads
