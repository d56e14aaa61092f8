"""A NUL character in a console query string or form field is refused with 422 and its reason, and nothing is
written. PostgreSQL cannot store NUL in text: views that read raw values passed it on and failed with a 500
there (on SQLite a search was cut at the NUL and matched everything)."""

import pytest

from outbox.models import Handoff, HandoffEvent
from reconciliation.models import Finding, FindingEvent, FindingStatus
from tests.console.clients import HTMX, client_for
from tests.factories import FindingFactory

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
REFUSED = "contains a NUL character"


@pytest.mark.parametrize(
    "path", ["/approvals/api/triggers/", "/reconciliation/findings/", "/handoffs/", "/approvals/"]
)
def test_a_search_with_nul_is_refused_with_its_reason(world, path):
    response = client_for(world["olga"]).get(path, {"q": "a\x00zzzz"})
    assert response.status_code == 422
    assert REFUSED in response.content.decode()


def test_a_finding_note_with_nul_is_refused_and_nothing_is_written(world):
    finding = FindingFactory()
    response = client_for(world["olga"]).post(
        f"/reconciliation/findings/{finding.pk}/acknowledge", {"note": "ack \x00 nul"}, **HTMX
    )
    assert response.status_code == 422 and REFUSED in response.content.decode()
    assert Finding.objects.get(pk=finding.pk).status == FindingStatus.OPEN
    assert not FindingEvent.objects.exists()


def test_a_cancel_reason_with_nul_is_refused_and_nothing_is_written(world, rejected):
    response = client_for(world["olga"]).post(
        f"/handoffs/{rejected.pk}/cancel", {"reason": "dup\x00"}, **HTMX
    )
    assert response.status_code == 422 and REFUSED in response.content.decode()
    assert Handoff.objects.get(pk=rejected.pk).state == rejected.state
    assert not HandoffEvent.objects.filter(action="cancel").exists()


def test_a_field_name_with_nul_is_refused(world, rejected):
    response = client_for(world["olga"]).post(
        f"/handoffs/{rejected.pk}/correct", {"field_client\x00name": "x", "reason": "fix"}, **HTMX
    )
    assert response.status_code == 422
    assert Handoff.objects.get(pk=rejected.pk).state == rejected.state


def test_a_form_without_nul_still_goes_through(world, rejected):
    response = client_for(world["olga"]).post(
        f"/handoffs/{rejected.pk}/cancel", {"reason": "duplicate"}, **HTMX
    )
    assert response.status_code == 200
    assert HandoffEvent.objects.filter(action="cancel").exists()
