"""The handoff list of a person in several workspaces, with no workspace chosen: one ordered branch per
workspace, each stopping after a page, merged (lib/paging.py `merge_by`). PostgreSQL read
`workspace_id IN (…) ORDER BY created_at, id` by fetching every row of those workspaces and sorting them
(about 1 s at 10,000,000 handoffs); the merge reads a page per workspace."""

import json
from datetime import timedelta
from urllib.parse import parse_qsl

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from approvals.models import Role
from outbox.models import Handoff
from outbox.search_text import search_text
from tests.builders import record
from tests.console.clients import client_for
from tests.factories import make_user, make_workspace

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
WORKSPACES = (7, 8, 9)


@pytest.fixture
def operator_of_three(db):
    workspaces = [make_workspace(pk) for pk in WORKSPACES]
    user = make_user("olive")
    for workspace in workspaces:
        user.memberships.create(workspace=workspace, role=Role.OPERATOR)
    return user


def _spread(per_workspace: int) -> None:
    """`per_workspace` handoffs in each workspace, interleaved in time, pairs sharing a timestamp."""
    template = record(0, workspace_id=WORKSPACES[0])
    fields = {
        f.attname: getattr(template, f.attname)
        for f in Handoff._meta.concrete_fields
        if not f.primary_key
    }
    Handoff.objects.bulk_create(
        [
            Handoff(
                **{
                    **fields,
                    "workspace_id": ws,
                    "source_id": n + 1,
                    "action_key": f"onboarding:{ws}:{n + 1}:1",
                    "instance_key": f"onboarding:{ws}:{n + 1}:1",
                    "search_text": search_text(
                        action_key=f"onboarding:{ws}:{n + 1}:1",
                        source_ref=template.source_ref,
                        payload=template.payload,
                    ),
                }
            )
            for n in range(per_workspace)
            for ws in WORKSPACES
        ],
        batch_size=500,
    )
    start = timezone.now() - timedelta(days=1)
    ids = list(Handoff.objects.order_by("pk").values_list("pk", flat=True))
    for i in range(0, len(ids), 2):
        Handoff.objects.filter(pk__in=ids[i : i + 2]).update(
            created_at=start + timedelta(seconds=i)
        )


def _listed_pages(client, data: dict) -> list[list[int]]:
    """Every page of the list for `data`, as handoff ids in the order shown, following 'next' links."""
    pages, query = [], dict(data)
    while True:
        response = client.get("/handoffs/", query)
        assert response.status_code == 200
        context = response.context
        pages.append([h.pk for h in context["handoffs"]])
        if not context["next_url"]:
            return pages
        query = {**data, "after": dict(parse_qsl(context["next_url"].lstrip("?")))["after"]}


def test_the_merged_list_shows_every_workspaces_handoffs_newest_first_each_once(operator_of_three):
    _spread(40)
    pages = _listed_pages(client_for(operator_of_three), {})
    shown = [pk for page in pages for pk in page]
    expected = list(
        Handoff.objects.filter(workspace_id__in=WORKSPACES)
        .order_by("-created_at", "-id")
        .values_list("pk", flat=True)
    )
    assert shown == expected
    assert len(pages) > 2, "several pages were walked"


def test_a_filter_and_a_chosen_workspace_still_apply_to_the_merged_list(operator_of_three):
    _spread(5)
    Handoff.objects.filter(workspace_id=8, source_id__lte=2).update(state="needs_attention")
    client = client_for(operator_of_three)
    [attention] = _listed_pages(client, {"state": "needs_attention"})
    assert set(attention) == set(
        Handoff.objects.filter(state="needs_attention").values_list("pk", flat=True)
    )
    assert len(attention) == 2
    [searched] = _listed_pages(client, {"q": "onboarding:8:"})  # the text search
    assert set(searched) == set(Handoff.objects.filter(workspace_id=8).values_list("pk", flat=True))
    [chosen] = _listed_pages(client, {"workspace": "9"})
    assert set(chosen) == set(Handoff.objects.filter(workspace_id=9).values_list("pk", flat=True))


@pytest.mark.postgres
def test_the_list_of_three_workspaces_reads_a_page_per_workspace_not_every_row(operator_of_three):
    assert connection.vendor == "postgresql", "plans are PostgreSQL's: run with DATABASE_URL"
    _spread(400)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE outbox_handoff")
    with CaptureQueriesContext(connection) as queries:
        assert client_for(operator_of_three).get("/handoffs/").status_code == 200
    [sql] = [
        q["sql"]
        for q in queries.captured_queries
        if 'FROM "outbox_handoff"' in q["sql"] and "ORDER BY" in q["sql"] and "LIMIT" in q["sql"]
    ]
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}")
        (raw,) = cursor.fetchone()
    plan = raw if isinstance(raw, list) else json.loads(raw)
    reads = [
        node
        for node in _walk(plan[0]["Plan"])
        if node.get("Relation Name") == Handoff._meta.db_table
    ]
    rows_read = sum(node["Actual Rows"] * node.get("Actual Loops", 1) for node in reads)
    # 3 × 400 rows in those workspaces; a page is 50 (+1): at most a page and one more row per workspace.
    assert rows_read <= len(WORKSPACES) * 52, (rows_read, [n["Node Type"] for n in reads])


def _walk(node: dict):
    yield node
    for child in node.get("Plans", []):
        yield from _walk(child)
