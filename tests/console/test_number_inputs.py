"""Numbers typed or edited into the console: digits that int() refuses ("²" is a digit to str.isdigit, and
int() refuses more than 4,300 digits) are answered with a 4xx and write nothing, never a 500."""

import pytest

from outbox.models import DestinationEvent, Handoff, HandoffEvent
from reconciliation.models import ReconciliationRun
from tests.console.clients import HTMX, client_for
from tests.factories import grant_destination_admin

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])

NOT_NUMBERS = ["\u00b2", "\u0664\u0662", "9" * 5000, str(2**63), "-1", "0"]


@pytest.mark.parametrize("raw", NOT_NUMBERS)
@pytest.mark.parametrize("path", ["/health/", "/health/duplicates/", "/reconciliation/findings/"])
def test_a_workspace_that_is_not_an_id_is_not_found(world, path, raw):
    assert client_for(world["olga"]).get(path, {"workspace": raw}).status_code == 404


@pytest.mark.parametrize("raw", NOT_NUMBERS)
def test_reconciling_a_workspace_that_is_not_an_id_is_not_found(world, raw):
    response = client_for(world["olga"]).post(
        "/reconciliation/runs/workspace", {"workspace": raw}, **HTMX
    )
    assert response.status_code == 404
    assert not ReconciliationRun.objects.exists()


@pytest.mark.parametrize("raw", NOT_NUMBERS)
def test_a_bulk_confirmation_up_to_no_id_applies_to_nothing(world, rejected, raw):
    response = client_for(world["olga"]).post(
        "/handoffs/bulk",
        {"bulk_action": "acknowledge", "bulk_confirm": "1", "bulk_upto": raw},
        **HTMX,
    )
    assert response.status_code == 200
    assert "Acknowledge 0 of 0 matching handoffs." in response.content.decode()
    assert not HandoffEvent.objects.filter(action="acknowledge").exists()


@pytest.mark.parametrize("raw", NOT_NUMBERS)
def test_assigning_to_an_owner_that_is_not_an_id_is_refused(world, rejected, raw):
    owner = rejected.owner_id
    response = client_for(world["olga"]).post(
        f"/handoffs/{rejected.pk}/assign", {"owner": raw}, **HTMX
    )
    assert response.status_code == 422
    assert Handoff.objects.get(pk=rejected.pk).owner_id == owner


@pytest.mark.parametrize("raw", NOT_NUMBERS)
def test_a_repair_naming_a_finding_that_is_not_an_id_is_refused(world, rejected, raw):
    response = client_for(world["olga"]).post(
        f"/handoffs/{rejected.pk}/repair",
        {"finding": raw, "what_was_done": "fixed by hand", "evidence": "ticket 1"},
        **HTMX,
    )
    assert 400 <= response.status_code < 500
    assert not HandoffEvent.objects.filter(action="manual_repair").exists()


@pytest.mark.parametrize("raw", ["\u00b2", "9" * 5000])
def test_a_destination_limit_that_is_not_a_number_is_refused(world, raw):
    olga = grant_destination_admin(world["olga"])
    response = client_for(olga).post(
        "/health/destinations/receiver/limits",
        {"max_concurrency": raw, "max_requests_per_second": "", "reason": "x"},
        **HTMX,
    )
    assert response.status_code == 422
    assert "whole number" in response.content.decode()
    assert not DestinationEvent.objects.filter(action="set_limits").exists()


@pytest.mark.parametrize("raw", NOT_NUMBERS)
def test_parse_id_refuses_what_int_cannot_read_or_the_database_cannot_hold(raw):
    from lib.querystring import BadQueryValue, id_or_none, parse_id

    with pytest.raises(BadQueryValue):
        parse_id(raw, name="after")
    assert id_or_none(raw) is None


def test_a_receivers_key_with_odd_digits_has_no_workspace():
    """Orphan tasks' keys come from the receiver: reconciliation reads their workspace without int() failing."""
    from reconciliation.classification import key_parts as _key_parts

    assert _key_parts("onboarding:\u00b2:42:1") == ("onboarding", None)
    assert _key_parts("onboarding:7:42:1") == ("onboarding", 7)
