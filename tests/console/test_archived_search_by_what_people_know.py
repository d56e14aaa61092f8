"""The archive is searched by what people know (issue 39): a settled handoff that left the hot tables is
still found by its client's name and e-mail, within the viewer's workspaces, and no longer once its subject
was erased. Both backends; on PostgreSQL the archive's trigram index serves it."""

from datetime import timedelta

import pytest
from django.db import connection
from django.db.models import F

from approvals.services.erasure import subject_erase, subject_named
from outbox.models import ArchivedHandoff, Handoff
from outbox.services.retention import handoffs_archive_settled
from tests.builders import approve, deliver
from tests.console.clients import client_for
from tests.factories import ONBOARDING_PAYLOAD, make_user

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
EMAIL = ONBOARDING_PAYLOAD["contact_email"]


@pytest.fixture
def archived(world) -> ArchivedHandoff:
    handoff = deliver(approve(world))
    deliver(approve(world, number=9, workspace=world["w8"]))
    Handoff.objects.update(updated_at=F("updated_at") - timedelta(days=400))
    handoffs_archive_settled(older_than_days=1)
    assert not Handoff.objects.exists()
    return ArchivedHandoff.objects.get(action_key=handoff.action_key)


def _found(user, typed: str) -> str:
    response = client_for(user).get("/handoffs/", {"q": typed})
    assert response.status_code == 200
    return response.content.decode()


@pytest.mark.parametrize("typed", ["northwind", "NORTHWIND Traders", EMAIL.upper()])
def test_an_archived_case_is_found_by_its_clients_name_and_e_mail(world, archived, typed):
    page = _found(world["olga"], typed)
    assert f"/handoffs/archived/{archived.pk}/" in page
    # Workspace 8's archived case for a client of the same name is not olga's to see.
    assert "onboarding:8:9:1" not in page


def test_an_erased_subject_is_not_found_in_the_archive(world, archived):
    eraser = make_user("erin", permissions=["outbox.erase_personal_data"])
    subject_erase(subject=subject_named(email=EMAIL), reason="ticket 4711", actor=eraser)
    assert f"/handoffs/archived/{archived.pk}/" not in _found(world["olga"], "northwind")
    assert f"/handoffs/archived/{archived.pk}/" in _found(world["olga"], archived.action_key)


@pytest.mark.postgres
def test_on_postgresql_the_archive_has_a_trigram_index_on_its_search_text(world):
    assert connection.vendor == "postgresql", (
        "the trigram index is PostgreSQL's: run with DATABASE_URL"
    )
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexdef FROM pg_indexes WHERE indexname = 'archived_search_trgm_idx'"
        )
        (definition,) = cursor.fetchone()
    assert "gin_trgm_ops" in definition and "search_text" in definition
