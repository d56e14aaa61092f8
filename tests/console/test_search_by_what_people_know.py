"""Support staff find a case by what a customer tells them (issue 39): the client's name, an e-mail, a field
the workflow's schema marks searchable; within their own workspaces; the e-mail still hidden on the page;
the admin's search the same; one indexed condition on PostgreSQL."""

import re

import pytest
from django.contrib.auth import get_user_model
from django.db import connections, transaction
from django.test import Client
from django.test.utils import CaptureQueriesContext

from approvals.rules import rules_for
from approvals.services import support_staff_enroll
from approvals.services.rule_versions import rule_version_publish
from console.filters import text_search
from lib.databases import DB
from outbox.models import Handoff
from tests.builders import approve, record
from tests.console.clients import client_for
from tests.factories import ONBOARDING_PAYLOAD, make_user

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])

EMAIL = ONBOARDING_PAYLOAD["contact_email"]


@pytest.fixture
def searchable_world(world):
    """Onboarding with `account_manager` marked searchable and `notes` not; request 61 of workspace 7 approved
    with both, and request 62 of workspace 8 for a client of the same name."""
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
    payload = {
        **ONBOARDING_PAYLOAD,
        "account_manager": "Ingrid Holm",
        "notes": "Needs a Danish invoice",
    }
    world["case"] = approve(world, number=61, payload=payload)
    world["other"] = approve(
        world, number=62, workspace=world["w8"], payload=dict(ONBOARDING_PAYLOAD)
    )
    return world


def _found(client, text: str) -> str:
    response = client.get("/handoffs/", {"q": text})
    assert response.status_code == 200
    return response.content.decode()


@pytest.mark.parametrize(
    "typed",
    ["northwind", "NORTHWIND traders", EMAIL.upper(), "ingrid holm", "request 61", "#61", "7:61"],
)
def test_a_case_is_found_by_name_email_and_searchable_field(searchable_world, typed):
    page = _found(client_for(searchable_world["olga"]), typed)
    assert f"/handoffs/{searchable_world['case'].pk}/" in page


def test_a_field_the_workflow_does_not_mark_searchable_finds_nothing(searchable_world):
    page = _found(client_for(searchable_world["olga"]), "danish invoice")
    assert f"/handoffs/{searchable_world['case'].pk}/" not in page


def test_found_by_e_mail_the_page_still_hides_it(searchable_world):
    page = _found(client_for(searchable_world["olga"]), EMAIL)
    assert f"/handoffs/{searchable_world['case'].pk}/" in page
    # Only in the forms, echoing what the viewer typed; the row shows no e-mail.
    assert "northwind.example" not in re.sub(r'value="[^"]*"', "", page)


def test_the_search_stays_within_the_viewers_workspaces(searchable_world):
    olga, otto = searchable_world["olga"], searchable_world["otto"]
    case, other = searchable_world["case"], searchable_world["other"]
    olgas, ottos = _found(client_for(olga), "Northwind"), _found(client_for(otto), "Northwind")
    assert f"/handoffs/{case.pk}/" in olgas and f"/handoffs/{other.pk}/" not in olgas
    assert f"/handoffs/{other.pk}/" in ottos and f"/handoffs/{case.pk}/" not in ottos


def test_every_step_of_a_workflow_is_found_by_the_instance_payload(searchable_world):
    """A later step sends part of the payload; it is found by the whole instance's fields all the same."""
    case = searchable_world["case"]
    assert Handoff.objects.get(pk=case.pk).search_text.count("ingrid holm") == 1


def test_the_admins_search_is_the_consoles(searchable_world):
    user = make_user("support")
    support_staff_enroll(user=user)
    client = Client()
    client.force_login(user)
    body = client.get("/admin/outbox/handoff/", {"q": EMAIL}).content.decode()
    assert searchable_world["case"].action_key in body
    assert "onboarding:7:42:1" not in body
    body = client.get("/admin/outbox/handoff/", {"q": "danish invoice"}).content.decode()
    assert searchable_world["case"].action_key not in body


@pytest.mark.parametrize("typed", ["north", "Northwind Tr", "ingrid h", "Onboarding@North"])
def test_a_case_is_found_by_the_starts_of_its_words(searchable_world, typed):
    page = _found(client_for(searchable_world["olga"]), typed)
    assert f"/handoffs/{searchable_world['case'].pk}/" in page


@pytest.mark.parametrize("typed", ["wind", "raders", "traders northwind", "northwind smith", "..."])
def test_a_word_found_only_inside_another_or_out_of_order_finds_nothing(searchable_world, typed):
    """The search matches the text as typed from the starts of words, as search boxes do: "wind" is inside
    "northwind", at no word's start."""
    page = _found(client_for(searchable_world["olga"]), typed)
    assert f"/handoffs/{searchable_world['case'].pk}/" not in page


def test_a_word_longer_than_the_index_holds_is_compared_whole(world):
    """The index holds a word's first 24 characters (`WORD_START_LENGTH`); the rest is compared too."""
    long = "Vestjyllandsfiskeriselskabet"  # 28 characters
    case = record(43, payload={**ONBOARDING_PAYLOAD, "client_name": f"{long} Holding"})
    found = text_search(Handoff.objects.using(DB), long.upper())
    assert list(found.values_list("pk", flat=True)) == [case.pk]
    assert not text_search(Handoff.objects.using(DB), f"{long[:24]}XXXX").exists()
    assert not text_search(Handoff.objects.using(DB), "fiskeriselskabet").exists()


def _run_plan(connection, sql: str) -> str:
    """The plan `sql` (as it ran, its values in it) is run by, with the pages it read."""
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (ANALYZE, BUFFERS) {sql}")
        return "\n".join(row[0] for row in cursor.fetchall())


@pytest.mark.postgres
def test_on_postgresql_the_search_is_one_condition_the_words_index_serves(searchable_world):
    connection = connections[DB]
    assert connection.vendor == "postgresql", (
        "the words' index is PostgreSQL's: run with DATABASE_URL"
    )
    query = text_search(Handoff.objects.using(DB), "Northwind")
    sql, params = query.query.sql_with_params()
    with transaction.atomic(using=DB), connection.cursor() as cursor:
        # A table of a few rows is read whole whatever its indexes; without that choice, an index must serve
        # the condition, and only the words' index can.
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(f"EXPLAIN {sql}", params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "handoff_search_words_idx" in plan, plan


# 100,000 handoffs whose clients all look alike ("Client <n>"), as `bench/search_bench.py` fills them.
LOOK_ALIKES = 100_000
FILL = """
INSERT INTO outbox_handoff (action_key, workflow, workspace_id, source_ref, source_id, rule_version, payload,
    payload_hash, destination, state, attempts, attempts_in_run, attempts_not_counted, next_attempt_at,
    lease_owner, fencing_epoch, destination_id, failure_class, reason_code, last_error, created_at, updated_at,
    instance_key, step, step_index, kind, plan, compensation_state, compensation_operation, work_status,
    receipt, request, order_key, search_text)
SELECT 'onboarding:7:' || n || ':1', 'onboarding', 7, 'request ' || n || ' revision 1', n, 'onboarding-v1',
    jsonb_build_object('client_name', 'Client ' || n, 'contact_email', 'c' || n || '@example.com'),
    md5(n::text) || md5(n::text), 'receiver', 'delivered', 1, 1, 0, now(), '', 1, md5(n::text), '', '', '',
    now() - n * interval '3 seconds', now(), '', '', 0, 'action', '[]'::jsonb, '', '', '', '{}'::jsonb,
    '{}'::jsonb, '', 'onboarding:7:' || n || ':1 | request ' || n || ' revision 1 | client ' || n || ' | c' || n
    || '@example.com'
FROM generate_series(1000, 1000 + %s - 1) AS n
"""


@pytest.mark.postgres
def test_on_postgresql_a_client_among_look_alikes_is_read_from_a_few_index_pages(world):
    """At 100,000 handoffs named `Client <n>`, ANALYZEd, the list page's search for one client reads the
    words' index (a rare word's entry, through which GIN skips the common word's list) and a few dozen
    pages; the trigram index read the lists of every trigram "client" and the digits share."""
    connection = connections[DB]
    assert connection.vendor == "postgresql", "the plan is PostgreSQL's: run with DATABASE_URL"
    with connection.cursor() as cursor:
        cursor.execute(FILL, [LOOK_ALIKES])
        # As (auto)vacuum leaves it: the rows written since are in the index's pending list, which every
        # search reads whole (up to gin_pending_list_limit, 4 MB), whatever it looks for.
        cursor.execute("SELECT gin_clean_pending_list('handoff_search_words_idx')")
        cursor.execute("ANALYZE outbox_handoff")
    with CaptureQueriesContext(connection) as ran:
        page = client_for(world["olga"]).get("/handoffs/", {"q": "Client 50007"}).content.decode()
    assert "onboarding:7:50007:1" in page and "onboarding:7:5000:1" not in page
    (searched,) = [q["sql"] for q in ran.captured_queries if "search_text_words(" in q["sql"]]
    plan = _run_plan(connection, searched)
    assert "handoff_search_words_idx" in plan and "Seq Scan on outbox_handoff" not in plan, plan
    # The pages the whole statement read (its first line of buffers), from memory or disk.
    whole = next(line for line in plan.splitlines() if "Buffers:" in line)
    assert sum(int(n) for n in re.findall(r"(?:hit|read)=(\d+)", whole)) <= 100, plan
