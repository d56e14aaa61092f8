"""The handoff search finds archived handoffs by action key: "archived on …, final state …, task …", and a
read-only page of what the archive kept, within the user's workspaces only (another's is a 404), redacted."""

import re
from datetime import timedelta

import pytest
from django.db.models import F

from outbox.models import ArchivedHandoff, Handoff, HandoffEvent
from outbox.services.retention import handoffs_archive_settled
from tests.builders import deliver, record
from tests.console.clients import client_for

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


@pytest.fixture
def archived(world) -> ArchivedHandoff:
    handoff = deliver(record(42))
    HandoffEvent.objects.filter(handoff=handoff).update(reason="token Bearer sk_live_abc123 used")
    deliver(record(1, workspace_id=8))
    Handoff.objects.update(updated_at=F("updated_at") - timedelta(days=40))
    handoffs_archive_settled()
    assert not Handoff.objects.exists()
    return ArchivedHandoff.objects.get(action_key=handoff.action_key)


def test_a_search_by_key_lists_the_archived_handoff(world, archived):
    response = client_for(world["olga"]).get("/handoffs/", {"q": "onboarding:7:42"})

    assert response.status_code == 200
    text = response.content.decode()
    assert "archived on" in text and "final state delivered" in text
    assert f"task {archived.task_id}" in text
    assert f"/handoffs/archived/{archived.pk}/" in text
    assert "onboarding:8:1:1" not in text


def test_the_archived_page_is_read_only_and_redacted(world, archived):
    response = client_for(world["olga"]).get(f"/handoffs/archived/{archived.pk}/")

    assert response.status_code == 200
    text = response.content.decode()
    # The final state sits in its claim (`data-claim`): the words are read without the tags.
    assert "final state delivered" in re.sub(r"<[^>]+>", "", text) and archived.task_id in text
    assert "sk_live_abc123" not in text
    assert "<form" not in text.split("<main", 1)[-1]


def test_another_workspaces_user_finds_nothing_and_gets_a_404(world, archived):
    mallory = client_for(world["mallory"])  # workspace 8 only

    listing = mallory.get("/handoffs/", {"q": "onboarding:7:42"}).content.decode()
    page = mallory.get(f"/handoffs/archived/{archived.pk}/")

    assert "onboarding:7:42" not in listing.replace('value="onboarding:7:42"', "")
    assert "archived-matches" not in listing
    assert page.status_code == 404
