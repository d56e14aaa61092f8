"""Requests are found by what people know (issue 39): client name, e-mail, a field the workflow marks
searchable, a request number or key; on the approvals queue, the members' Requests page, My requests and the
admin, each within its viewer's scope, personal fields still hidden; the text written with the revision and
erased with its subject; one indexed condition on PostgreSQL."""

import re

import pytest
from django.contrib.auth import get_user_model
from django.db import connections, transaction
from django.test.utils import CaptureQueriesContext

from approvals.models import Request, Role
from approvals.request_search import request_search_text, requests_matching
from approvals.rules import rules_for
from approvals.selectors import requests_awaiting_decision
from approvals.services import request_revise, request_submit, support_staff_enroll
from approvals.services.cancellation import request_cancel
from approvals.services.erasure import subject_erase, subject_named
from approvals.services.rule_versions import rule_version_publish
from lib.databases import DB
from tests.console.clients import client_for
from tests.factories import ONBOARDING_PAYLOAD, make_request, make_user

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
    [
        "fjord",
        "FJORD foods",
        EMAIL.upper(),
        "ingrid holm",
        "request 61",
        "61",
        "#61",
        "onboarding:7:61:1",
    ],
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


# --- Beyond the queue: the members' Requests page, My requests and the admin -------------------------

ADMIN = "/admin/approvals/request/"
SURFACES = ("requests page", "my requests", "admin")
# Who searches each, where; support staff read every workspace in admin (docs/security.md): there the
# workspace filter narrows the searches below to workspace 7, and a search without it reads them all.
SEARCHERS = {
    "requests page": ("olga", "/approvals/search/", {}),
    "my requests": ("bob", "/approvals/mine/", {}),
    "admin": ("support", ADMIN, {"workspace__id__exact": "7"}),
}


@pytest.fixture
def everywhere_world(requests_world):
    """`requests_world` with support staff, and a request for the same client that bob filed in workspace 8,
    where he holds no role: no page of his shows it."""
    world = requests_world
    world["support"] = make_user("support")
    support_staff_enroll(user=world["support"])
    stray = make_request(world["w8"], 63, world["bob"], payload=dict(CASE))
    stray.search_text = request_search_text(stray)
    stray.save(update_fields=["search_text"])
    world["stray"] = stray
    return world


def _search(world, surface: str, typed: str) -> str:
    viewer, path, scope = SEARCHERS[surface]
    response = client_for(world[viewer]).get(path, {"q": typed, **scope})
    assert response.status_code == 200, (surface, response.status_code)
    return response.content.decode()


def _listed(surface: str, page: str, request: Request) -> bool:
    return {
        "requests page": f'id="request-{request.workspace_id}-{request.number}-{request.revision}"',
        "my requests": f'id="my-request-{request.workspace_id}-{request.number}"',
        "admin": f"/admin/approvals/request/{request.pk}/change/",
    }[surface] in page


def _as_read(page: str) -> str:
    """The page without the attributes that echo what the viewer typed (the box, links keeping the search)."""
    return re.sub(r'(?:value|href)="[^"]*"', "", page)


@pytest.mark.parametrize("surface", SURFACES)
@pytest.mark.parametrize("typed", ["FJORD foods", EMAIL.upper(), "ingrid holm", "#61"])
def test_each_request_search_finds_by_name_email_and_searchable_field(
    everywhere_world, surface, typed
):
    page = _search(everywhere_world, surface, typed)
    assert _listed(surface, page, everywhere_world["case"])
    # Northwind's request 42 of the same workspace (and requester) is left out.
    assert not _listed(surface, page, everywhere_world["request"])


# The admin is left out: its workspace filter, not the search, would keep the other workspace out.
@pytest.mark.parametrize("surface", ["requests page", "my requests"])
def test_no_request_search_shows_a_request_of_another_workspace(everywhere_world, surface):
    page = _search(everywhere_world, surface, "fjord")
    assert _listed(surface, page, everywhere_world["case"])
    assert not _listed(surface, page, everywhere_world["request"])
    assert not _listed(surface, page, everywhere_world["other"])
    assert not _listed(surface, page, everywhere_world["stray"])


def test_the_admins_request_search_without_a_filter_finds_every_workspaces_requests(
    everywhere_world,
):
    """Support staff read every workspace in the admin (docs/security.md): its search, unfiltered, finds
    the client's requests of workspaces 7 and 8, and still leaves Northwind's out."""
    response = client_for(everywhere_world["support"]).get(ADMIN, {"q": "fjord"})
    assert response.status_code == 200
    page = response.content.decode()
    for found in ("case", "other", "stray"):
        assert _listed("admin", page, everywhere_world[found]), found
    assert not _listed("admin", page, everywhere_world["request"])


@pytest.mark.parametrize("surface", SURFACES)
def test_a_corrected_request_is_found_by_the_key_of_its_replaced_revision(
    everywhere_world, surface
):
    """After a correction the old handoffs' key still names the request: the Requests page and My
    requests (which show each request's newest revision) list the revision that replaced it, the admin
    the typed revision and the later one."""
    first = everywhere_world["case"]
    revised = request_revise(
        workspace_id=7,
        number=61,
        payload={**CASE, "client_name": "Fjord Seafood"},
        actor=everywhere_world["bob"],
    )
    page = _search(everywhere_world, surface, "onboarding:7:61:1")
    assert _listed(surface, page, revised)
    assert not _listed(surface, page, everywhere_world["request"])
    if surface == "admin":
        # Every revision is a row there: the typed one and the later one; a key never names an earlier one.
        assert _listed(surface, page, first)
        assert not _listed(surface, _search(everywhere_world, surface, "onboarding:7:61:2"), first)
    elif surface == "requests page":
        assert not _listed(surface, page, first)


@pytest.mark.parametrize("surface", [*SURFACES, "queue"])
def test_a_corrected_request_is_found_by_the_payload_hash_of_its_replaced_revision(
    everywhere_world, surface
):
    """The hash the approver saw before a correction still names the request: each list finds the revision
    that replaced it (the admin the hash's revision and the later one), never a request whose revisions
    never carried it, even one of the same number in another workspace."""
    first = everywhere_world["case"]
    revised = request_revise(
        workspace_id=7,
        number=61,
        payload={**CASE, "client_name": "Fjord Seafood"},
        actor=everywhere_world["bob"],
    )
    assert revised.payload_hash != first.payload_hash
    # Request 61 of workspace 8, another payload: a hash of workspace 7 does not name it.
    namesake = make_request(everywhere_world["w8"], 61, everywhere_world["wendy"])
    typed = first.payload_hash.upper()
    if surface == "queue":
        page = _queue(everywhere_world["alice"], typed)
        assert f'id="request-7-61-{revised.revision}"' in page
        assert "request-7-42-" not in page
        return
    page = _search(everywhere_world, surface, typed)
    assert _listed(surface, page, revised)
    assert not _listed(surface, page, everywhere_world["request"])
    assert not _listed(surface, page, namesake)
    if surface == "admin":
        assert _listed(surface, page, first)
        # The new revision's hash names it alone: a hash never names an earlier revision.
        later = _search(everywhere_world, surface, revised.payload_hash)
        assert _listed(surface, later, revised) and not _listed(surface, later, first)
    elif surface == "requests page":
        assert not _listed(surface, page, first)


def test_the_admins_search_by_a_payload_hash_finds_its_revisions_in_every_workspace(
    everywhere_world,
):
    """Unfiltered, the admin's search by a payload hash lists each revision that carried it (the same
    payload in workspaces 7 and 8), and not the requests of the same numbers that never did."""
    namesakes = [
        make_request(everywhere_world["w7"], 62, everywhere_world["bob"]),
        make_request(everywhere_world["w8"], 61, everywhere_world["wendy"]),
    ]
    typed = everywhere_world["case"].payload_hash
    response = client_for(everywhere_world["support"]).get(ADMIN, {"q": typed})
    assert response.status_code == 200
    page = response.content.decode()
    for found in ("case", "other", "stray"):
        assert _listed("admin", page, everywhere_world[found]), found
    for namesake in namesakes:
        assert not _listed("admin", page, namesake), namesake


@pytest.mark.parametrize("surface", SURFACES)
def test_found_by_e_mail_no_request_search_shows_it(everywhere_world, surface):
    page = _search(everywhere_world, surface, EMAIL)
    assert _listed(surface, page, everywhere_world["case"])
    assert not _listed(surface, page, everywhere_world["request"])
    assert "fjord-foods.example" not in _as_read(page)


@pytest.mark.parametrize("surface", [*SURFACES, "queue"])
@pytest.mark.parametrize(
    ("typed", "reason"),
    [
        ("onboarding:7:" + "9" * 30 + ":1", "at most 18 digits"),
        ("fjord " * 40, "at most 200 characters"),
    ],
)
def test_a_search_that_cannot_be_read_is_a_400_with_its_reason(
    everywhere_world, surface, typed, reason
):
    viewer, path, _scope = {**SEARCHERS, "queue": ("alice", "/approvals/", {})}[surface]
    response = client_for(everywhere_world[viewer]).get(path, {"q": typed})
    assert response.status_code == 400, (surface, response.status_code)
    assert reason in response.content.decode()


@pytest.mark.parametrize("rows", [2, 20])
def test_the_requests_page_reads_a_fixed_number_of_queries_across_workspaces(
    world, rows, django_assert_max_num_queries
):
    """An operator of two workspaces: the page reads both (merged, one branch each, on PostgreSQL) with the
    same queries whatever it shows, each row naming its workspace and requester."""
    olga = world["olga"]
    olga.memberships.create(workspace=world["w8"], role=Role.OPERATOR)
    for n in range(rows):
        make_request(world["w7" if n % 2 else "w8"], 100 + n, world["bob"])
    client = client_for(olga)
    with django_assert_max_num_queries(8):
        page = client.get("/approvals/search/").content.decode()
    assert page.count('id="request-8-') == rows // 2 and "Supplier onboarding (#8)" in page
    assert page.count('id="request-7-') == rows // 2 + 1 and "Client onboarding (#7)" in page


PLAN_ROWS = 100_000
# A statement that searches requests' text (not one that merely reads the column).
SEARCHES = re.compile(r'"approvals_request"\."search_text"(?:::text)? LIKE')
# The requests of the plan tests, of the service's shape: one client in `every` is "Client <n> Holdings".
FILL_SQL = """
INSERT INTO approvals_request (workflow, workspace_id, number, revision, payload, payload_hash, state,
    requested_by_id, reason_code, search_text, created_at, updated_at)
SELECT 'onboarding', 7, 1000 + n, 1,
    jsonb_build_object('client_name', 'Client ' || n, 'contact_email', 'c' || n || '@example.com'),
    md5(n::text), 'awaiting_approval', %(requester)s, '',
    'onboarding:7:' || (1000 + n) || ':1 | request ' || (1000 + n) || ' revision 1 | client ' || n
        || CASE WHEN n %% %(every)s = 0 THEN ' holdings' ELSE '' END || ' | c' || n || '@example.com',
    now() - make_interval(secs => n), now() - make_interval(secs => n)
FROM generate_series(1, %(rows)s) AS n
"""


def _plan(connection, ran: CaptureQueriesContext, sql: str) -> str:
    """The plan of a statement a page ran, under the planner settings it ran with: the settings statements
    before it (`lib.paging.planned_serially`) are replayed in the transaction that EXPLAINs it."""
    ran_sql = [q["sql"] for q in ran.captured_queries]
    settings = [q for q in ran_sql[: ran_sql.index(sql)] if "set_config(" in q]
    with transaction.atomic(using=DB), connection.cursor() as cursor:
        for statement in settings:
            cursor.execute(statement)
        cursor.execute(f"EXPLAIN {sql}")
        return "\n".join(row[0] for row in cursor.fetchall())


@pytest.mark.postgres
@pytest.mark.long
def test_on_postgresql_the_request_search_reads_the_trigram_index_at_100k_requests(world):
    """At 100,000 requests awaiting a decision, ANALYZEd, the queue's search by a client's name is read
    through the trigram index (migration approvals 0015), not by reading every request."""
    connection = connections[DB]
    assert connection.vendor == "postgresql", "PostgreSQL's planner: run with DATABASE_URL"
    with connection.cursor() as cursor:
        cursor.execute(FILL_SQL, {"rows": PLAN_ROWS, "requester": world["bob"].pk, "every": 1000})
        cursor.execute("ANALYZE approvals_request")
    # What the queue page runs (`searched_page`: the matches found, then sorted), not a query built beside
    # it: a query ordered like the new (workspace, created_at, id) index was walked in order and filtered
    # row by row in one run, as ANALYZE's sample guessed.
    with CaptureQueriesContext(connection) as ran:
        response = client_for(world["alice"]).get("/approvals/", {"q": "holdings"})
    assert response.status_code == 200
    searched = [q["sql"] for q in ran.captured_queries if SEARCHES.search(q["sql"])]
    assert searched
    for sql in searched:
        plan = _plan(connection, ran, sql)
        assert "request_search_trgm_idx" in plan, (sql, plan)
    matching = requests_matching(requests_awaiting_decision(world["alice"]), "holdings")
    assert matching.count() == PLAN_ROWS // 1000


@pytest.mark.postgres
@pytest.mark.long
def test_on_postgresql_the_requests_page_my_requests_and_the_admin_read_the_trigram_index(world):
    """At 100,000 requests, ANALYZEd, every statement that searches on the members' Requests page, My requests
    and the admin's request list (as each page runs it) is read through `request_search_trgm_idx`."""
    connection = connections[DB]
    assert connection.vendor == "postgresql", "PostgreSQL's planner: run with DATABASE_URL"
    with connection.cursor() as cursor:
        cursor.execute(FILL_SQL, {"rows": PLAN_ROWS, "requester": world["bob"].pk, "every": 1000})
        cursor.execute("ANALYZE approvals_request")
    world["support"] = make_user("support")
    support_staff_enroll(user=world["support"])
    # Unsearched, the Requests page reads a workspace's newest requests from its ordered index.
    with CaptureQueriesContext(connection) as ran:
        assert client_for(world["olga"]).get("/approvals/search/").status_code == 200
    (listed,) = [
        q["sql"]
        for q in ran.captured_queries
        if "ORDER BY" in q["sql"] and "approvals_request" in q["sql"]
    ]
    plan = _plan(connection, ran, listed)
    assert "request_ws_age_idx" in plan, plan
    for surface in SURFACES:
        viewer, path, _scope = SEARCHERS[surface]
        with CaptureQueriesContext(connection) as ran:
            response = client_for(world[viewer]).get(path, {"q": "holdings"})
        assert response.status_code == 200, surface
        searched = [q["sql"] for q in ran.captured_queries if SEARCHES.search(q["sql"])]
        assert searched, surface
        for sql in searched:
            plan = _plan(connection, ran, sql)
            assert "request_search_trgm_idx" in plan, (surface, sql, plan)


def _analyze_until_guessed_common(cursor) -> int:
    """ANALYZE until its sample makes the planner guess the rare "holdings" common (a histogram bound holds
    it: about 1,000 of 100,000 rows for 100 true, in about 1 ANALYZE in 12), and that estimate."""
    for _ in range(300):
        cursor.execute("ANALYZE approvals_request")
        cursor.execute(
            "EXPLAIN SELECT 1 FROM approvals_request WHERE search_text LIKE '%%holdings%%'"
        )
        guessed = int(re.search(r"rows=(\d+)", cursor.fetchone()[0]).group(1))
        if guessed >= 500:
            return guessed
    pytest.fail("300 ANALYZEs never guessed the rare client common")


@pytest.mark.postgres
@pytest.mark.long
def test_on_postgresql_a_rare_client_the_sample_guesses_common_is_still_read_from_the_trigram_index(
    world,
):
    """One client in 1,000 is a Holdings, and ANALYZE's sample guesses 1% of requests match (it did in a
    CI run). Parallel plans then sorted a parallel scan of the whole table below a Gather Merge to stop
    the newest-revision anti-join after a page, on the Requests page and My requests; planned serially
    (`lib.paging.planned_serially`), every list searches through `request_search_trgm_idx` still."""
    connection = connections[DB]
    assert connection.vendor == "postgresql", "PostgreSQL's planner: run with DATABASE_URL"
    world["support"] = make_user("support")
    support_staff_enroll(user=world["support"])
    with connection.cursor() as cursor:
        cursor.execute(FILL_SQL, {"rows": PLAN_ROWS, "requester": world["bob"].pk, "every": 1000})
        assert _analyze_until_guessed_common(cursor) >= 500
    for surface, (viewer, path, scope) in {
        "queue": ("alice", "/approvals/", {}),
        **SEARCHERS,
    }.items():
        with CaptureQueriesContext(connection) as ran:
            response = client_for(world[viewer]).get(path, {"q": "holdings", **scope})
        assert response.status_code == 200, surface
        searched = [q["sql"] for q in ran.captured_queries if SEARCHES.search(q["sql"])]
        assert searched, surface
        for sql in searched:
            plan = _plan(connection, ran, sql)
            assert "request_search_trgm_idx" in plan, (surface, sql, plan)
            assert "Seq Scan on approvals_request" not in plan, (surface, sql, plan)


@pytest.mark.postgres
@pytest.mark.long
def test_on_postgresql_a_search_the_planner_guesses_common_finds_the_matches_then_sorts(world):
    """One client in 20 is a Holdings: ANALYZE's sample then guesses several percent of requests match, and
    a list ordered like the (workspace, created_at, id) or (state, created_at, id) index walked it in order
    testing each row, which reads a whole workspace when the guess is wrong (a rare client the sample
    happened to hold). The queue, the Requests page and My requests find the matches (trigram index, or a
    scan where they are that many) and sort them (`keyset_page` `narrowed_first`)."""
    connection = connections[DB]
    assert connection.vendor == "postgresql", "PostgreSQL's planner: run with DATABASE_URL"
    with connection.cursor() as cursor:
        cursor.execute(FILL_SQL, {"rows": PLAN_ROWS, "requester": world["bob"].pk, "every": 20})
        cursor.execute("ANALYZE approvals_request")
    for viewer, path in (("alice", "/approvals/"), *(SEARCHERS[s][:2] for s in SURFACES[:2])):
        with CaptureQueriesContext(connection) as ran:
            response = client_for(world[viewer]).get(path, {"q": "holdings"})
        assert response.status_code == 200, path
        (searched,) = [q["sql"] for q in ran.captured_queries if SEARCHES.search(q["sql"])]
        plan = _plan(connection, ran, searched)
        assert "Sort Key: approvals_request.created_at" in plan, (path, plan)
        assert "request_ws_age_idx" not in plan and "request_state_age_idx" not in plan, (
            path,
            plan,
        )


# Request 1000+n, revision 1, for n up to PLAN_ROWS; every 10th corrected into a revision 2 awaiting a
# decision, its revision 1 superseded. Each revision's payload hash is its own.
CORRECTED_FILL_SQL = """
WITH filled AS (
    INSERT INTO approvals_request (workflow, workspace_id, number, revision, payload, payload_hash, state,
        requested_by_id, reason_code, search_text, created_at, updated_at)
    SELECT 'onboarding', 7, 1000 + n, 1, jsonb_build_object('client_name', 'Client ' || n),
        md5(n::text) || md5('rev 1'), CASE WHEN n %% 10 = 0 THEN 'superseded' ELSE 'awaiting_approval' END,
        %(requester)s, '', 'client ' || n, now() - make_interval(secs => n), now()
    FROM generate_series(1, %(rows)s) AS n
    RETURNING number
)
INSERT INTO approvals_request (workflow, workspace_id, number, revision, payload, payload_hash, state,
    requested_by_id, reason_code, search_text, created_at, updated_at)
SELECT 'onboarding', 7, number, 2, jsonb_build_object('client_name', 'Client ' || (number - 1000)),
    md5((number - 1000)::text) || md5('rev 2'), 'awaiting_approval', %(requester)s, '',
    'client ' || (number - 1000), now(), now()
FROM filled WHERE (number - 1000) %% 10 = 0
"""
# A statement that looks requests up by their payload hash.
BY_HASH = re.compile(r'"payload_hash" = ')


@pytest.mark.postgres
@pytest.mark.long
def test_on_postgresql_a_replaced_revisions_payload_hash_is_read_from_its_index(world):
    """At 100,000 requests, 10,000 of them corrected, ANALYZEd: the queue, the Requests page, My requests
    and the admin find request 51,000 by its replaced revision's payload hash, and every statement that
    looks up the hash (as each page runs it) reads `request_payload_hash_idx` (approvals 0017)."""
    connection = connections[DB]
    assert connection.vendor == "postgresql", "PostgreSQL's planner: run with DATABASE_URL"
    with connection.cursor() as cursor:
        cursor.execute(CORRECTED_FILL_SQL, {"rows": PLAN_ROWS, "requester": world["bob"].pk})
        cursor.execute("ANALYZE approvals_request")
        cursor.execute("SELECT md5('50000') || md5('rev 1')")
        (typed,) = cursor.fetchone()
    world["support"] = make_user("support")
    support_staff_enroll(user=world["support"])
    found = {
        "queue": 'id="request-7-51000-2"',
        "requests page": 'id="request-7-51000-2"',
        "my requests": 'id="my-request-7-51000"',
    }
    for surface, (viewer, path, scope) in {
        "queue": ("alice", "/approvals/", {}),
        **SEARCHERS,
    }.items():
        with CaptureQueriesContext(connection) as ran:
            response = client_for(world[viewer]).get(path, {"q": typed, **scope})
        assert response.status_code == 200, surface
        page = response.content.decode()
        if surface == "admin":
            revised = Request.objects.get(workspace_id=7, number=51000, revision=2)
            assert _listed(surface, page, revised), surface
        else:
            assert found[surface] in page, surface
        searched = [q["sql"] for q in ran.captured_queries if BY_HASH.search(q["sql"])]
        assert searched, surface
        for sql in searched:
            plan = _plan(connection, ran, sql)
            assert "request_payload_hash_idx" in plan, (surface, sql, plan)
            # From the hash's few revisions to their request's: no request read that never carried it.
            assert "Seq Scan on approvals_request" not in plan, (surface, sql, plan)
