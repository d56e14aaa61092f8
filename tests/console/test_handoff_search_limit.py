"""The handoff list's search and the handoff admin's take what the request searches take (`lib/search_syntax.py`):
a search longer than 200 characters is not run. The list answers 400 with the reason and lists nothing (not
every handoff, as an ignored filter would); a bulk action over it does nothing; the admin says why above an
empty list, never a 500."""

import pytest

from approvals.services import support_staff_enroll
from outbox.models import Handoff, HandoffState
from tests.console.clients import HTMX, client_for
from tests.factories import make_user

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])

# Northwind's handoff holds "northwind": 239 characters of it, once stripped, are more than any search.
TOO_LONG = "northwind " * 24
REASON = "a search is at most 200 characters (this one has 239)"


def test_the_handoff_list_answers_a_search_too_long_with_400_and_its_reason(world, pending):
    olga = client_for(world["olga"])
    assert (
        f'id="handoff-{pending.pk}"' in olga.get("/handoffs/", {"q": "northwind"}).content.decode()
    )
    for headers in ({}, HTMX):
        response = olga.get("/handoffs/", {"q": TOO_LONG}, **headers)
        assert response.status_code == 400, headers
        page = response.content.decode()
        assert f'id="handoff-search-error" role="alert">Not searched: {REASON}.</p>' in page
        assert f'id="handoff-{pending.pk}"' not in page and "No handoffs match." in page


def test_a_bulk_action_over_a_search_too_long_does_nothing(world, rejected):
    response = client_for(world["olga"]).post(
        "/handoffs/bulk", {"q": TOO_LONG, "state": "attention", "bulk_action": "acknowledge"}
    )
    assert response.status_code == 422
    assert REASON in response.content.decode()
    rejected.refresh_from_db()
    assert rejected.state == HandoffState.NEEDS_ATTENTION


def test_the_handoff_admin_says_why_it_did_not_search_and_lists_nothing(world, pending):
    support = make_user("sam")
    support_staff_enroll(user=support)
    admin = client_for(support)
    found = admin.get("/admin/outbox/handoff/", {"q": "northwind"})
    assert [h.pk for h in found.context["cl"].result_list] == [pending.pk]
    response = admin.get("/admin/outbox/handoff/", {"q": TOO_LONG})
    assert response.status_code == 200
    assert list(response.context["cl"].result_list) == []
    assert f"Not searched: {REASON}." in [str(m) for m in response.context["messages"]]
    assert f"Not searched: {REASON}." in response.content.decode()
    assert Handoff.objects.filter(pk=pending.pk).exists()
