"""Requests awaiting a decision are found by what people know (issue 39): client name, e-mail, a field the
workflow marks searchable, a request number or key; within the approver's workspaces; the text written with
the revision and erased with its subject; one indexed condition on PostgreSQL."""

import pytest
from django.contrib.auth import get_user_model
from django.db import connections, transaction

from approvals.models import Request, Role
from approvals.rules import rules_for
from approvals.selectors import requests_awaiting_decision
from approvals.services import request_revise, request_submit
from approvals.services.cancellation import request_cancel
from approvals.services.erasure import subject_erase, subject_named
from approvals.services.rule_versions import rule_version_publish
from console.filters import requests_matching
from lib.databases import DB
from tests.console.clients import client_for
from tests.factories import ONBOARDING_PAYLOAD, make_user

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])

EMAIL = "anna@fjord-foods.example"
CASE = {
    "client_name": "Fjord Foods",
    "contact_email": EMAIL,
    "plan": "standard",
    "account_manager": "Ingrid Holm",
    "notes": "Needs a Danish invoice",
}


@pytest.fixture
def requests_world(world):
    """Onboarding with `account_manager` marked searchable and `notes` not; request 61 of workspace 7 for
    Fjord Foods awaiting a decision beside request 42 (Northwind), and request 62 of workspace 8 for a
    client of the same name."""
    schema = rules_for("onboarding").schema
    properties = {
        **schema["properties"],
        "account_manager": {"type": "string", "x-searchable": True},
    }
    rule_version_publish(
        workflow="onboarding",
        schema={**schema, "properties": properties},
        steps=[],
        actor=get_user_model().objects.create_superuser("rules-admin", password="x-long-enough"),
    )
    world["case"] = request_submit(
        workspace_id=7, number=61, payload=dict(CASE), requested_by=world["bob"]
    )
    world["wendy"] = make_user("wendy", workspace=world["w8"], roles=(Role.REQUESTER,))
    world["other"] = request_submit(
        workspace_id=8, number=62, payload=dict(CASE), requested_by=world["wendy"]
    )
    return world


def _row(request: Request) -> str:
    return f'id="request-{request.workspace_id}-{request.number}-{request.revision}"'


def _queue(user, text: str) -> str:
    response = client_for(user).get("/approvals/", {"q": text})
    assert response.status_code == 200
    return response.content.decode()


@pytest.mark.parametrize(
    "typed",
    ["fjord", "FJORD foods", EMAIL.upper(), "ingrid holm", "request 61", "61", "onboarding:7:61:1"],
)
def test_a_request_awaiting_a_decision_is_found_by_name_email_field_number_or_key(
    requests_world, typed
):
    page = _queue(requests_world["alice"], typed)
    assert _row(requests_world["case"]) in page
    assert 'id="request-7-42-1"' not in page


def test_a_field_the_workflow_does_not_mark_searchable_finds_nothing(requests_world):
    page = _queue(requests_world["alice"], "danish invoice")
    assert _row(requests_world["case"]) not in page
    assert "No request awaiting your decision matches" in page


def test_the_request_search_stays_within_the_approvers_workspaces(requests_world):
    alices, mallorys = (
        _queue(requests_world["alice"], "fjord"),
        _queue(requests_world["mallory"], "fjord"),
    )
    case, other = requests_world["case"], requests_world["other"]
    assert _row(case) in alices and _row(other) not in alices
    assert _row(other) in mallorys and _row(case) not in mallorys


def test_a_new_revision_is_found_by_what_it_now_says(requests_world):
    revised = request_revise(
        workspace_id=7,
        number=61,
        payload={**CASE, "client_name": "Fjord Seafood"},
        actor=requests_world["bob"],
    )
    assert _row(revised) in _queue(requests_world["alice"], "seafood")
    assert _row(revised) not in _queue(requests_world["alice"], "fjord foods")


def test_an_erased_subject_is_no_longer_found_among_requests(requests_world):
    request_cancel(workspace_id=7, number=61, actor=requests_world["bob"], reason="duplicate")
    request_cancel(workspace_id=8, number=62, actor=requests_world["wendy"], reason="duplicate")
    erin = make_user("erin", permissions=["outbox.erase_personal_data"])
    subject_erase(subject=subject_named(email=EMAIL), reason="ticket 4711", actor=erin)
    for typed in (EMAIL, "fjord", "ingrid"):
        assert not Request.objects.filter(search_text__contains=typed).exists(), typed
    # Found by its key still.
    assert Request.objects.filter(search_text__contains="onboarding:7:61:1").exists()


def test_the_northwind_request_of_the_bench_shape_is_not_found_by_fjord(requests_world):
    """Request 42 of the world is Northwind's: a search for another client leaves it out, a search for it
    finds it once it has search text (written by the service; the factory's row has none)."""
    request_revise(
        workspace_id=7, number=42, payload=dict(ONBOARDING_PAYLOAD), actor=requests_world["bob"]
    )
    page = _queue(requests_world["alice"], "northwind")
    assert 'id="request-7-42-2"' in page and _row(requests_world["case"]) not in page


PLAN_ROWS = 100_000
# The requests of the plan test, of the service's shape: one client in a thousand is "Client <n> Holdings".
FILL_SQL = """
INSERT INTO approvals_request (workflow, workspace_id, number, revision, payload, payload_hash, state,
    requested_by_id, reason_code, search_text, created_at, updated_at)
SELECT 'onboarding', 7, 1000 + n, 1,
    jsonb_build_object('client_name', 'Client ' || n, 'contact_email', 'c' || n || '@example.com'),
    md5(n::text), 'awaiting_approval', %(requester)s, '',
    'onboarding:7:' || (1000 + n) || ':1 | request ' || (1000 + n) || ' revision 1 | client ' || n
        || CASE WHEN n %% 1000 = 0 THEN ' holdings' ELSE '' END || ' | c' || n || '@example.com',
    now() - make_interval(secs => n), now() - make_interval(secs => n)
FROM generate_series(1, %(rows)s) AS n
"""


@pytest.mark.postgres
@pytest.mark.long
def test_on_postgresql_the_request_search_reads_the_trigram_index_at_100k_requests(world):
    """At 100,000 requests awaiting a decision, ANALYZEd, the queue's search by a client's name is read
    through the trigram index (migration approvals 0015), not by reading every request."""
    connection = connections[DB]
    assert connection.vendor == "postgresql", "PostgreSQL's planner: run with DATABASE_URL"
    with connection.cursor() as cursor:
        cursor.execute(FILL_SQL, {"rows": PLAN_ROWS, "requester": world["bob"].pk})
        cursor.execute("ANALYZE approvals_request")
    query = requests_matching(requests_awaiting_decision(world["alice"]), "holdings")
    # As the queue reads it: one page, oldest first.
    sql, params = query[:51].query.sql_with_params()
    with transaction.atomic(using=DB), connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN {sql}", params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "request_search_trgm_idx" in plan, plan
    assert len(list(query)) == PLAN_ROWS // 1000
