"""Support staff find a case by what a customer tells them (issue 39): the client's name, an e-mail, a field
the workflow's schema marks searchable; within their own workspaces; the e-mail still hidden on the page;
the admin's search the same; one indexed condition on PostgreSQL."""

import re

import pytest
from django.contrib.auth import get_user_model
from django.db import connections, transaction
from django.test import Client

from approvals.rules import rules_for
from approvals.services import support_staff_enroll
from approvals.services.rule_versions import rule_version_publish
from console.filters import text_search
from lib.databases import DB
from outbox.models import Handoff
from tests.builders import approve
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


@pytest.mark.postgres
def test_on_postgresql_the_search_is_one_condition_the_trigram_index_serves(searchable_world):
    connection = connections[DB]
    assert connection.vendor == "postgresql", (
        "the trigram index is PostgreSQL's: run with DATABASE_URL"
    )
    query = text_search(Handoff.objects.using(DB), "Northwind")
    sql, params = query.query.sql_with_params()
    with transaction.atomic(using=DB), connection.cursor() as cursor:
        # A table of a few rows is read whole whatever its indexes; without that choice, an index must serve
        # the condition, and only the trigram index can.
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(f"EXPLAIN {sql}", params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "handoff_search_trgm_idx" in plan, plan
