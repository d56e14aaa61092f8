"""Django admin for support staff: read-only outbox records, filters, search, and the safe actions."""

import pytest
from django.test import Client

from outbox.models import HandoffEvent, HandoffState
from tests.factories import make_user

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


@pytest.fixture
def support(world):
    user = make_user("support", is_staff=True, is_superuser=True)
    client = Client()
    client.force_login(user)
    return client


def test_changelist_has_the_console_filters_and_searches_by_key_and_request(support, rejected, uncertain):
    page = support.get("/admin/outbox/handoff/", {"q": "request 50"})
    assert page.status_code == 200
    body = page.content.decode()
    assert "onboarding:7:50:1" in body and "onboarding:7:42:1" not in body
    for title in ("By state", "By retrying (in backoff)", "By failure class", "By workspace id", "By owner",
                  "By age"):
        assert title in body
    filtered = support.get("/admin/outbox/handoff/", {"state__exact": "uncertain"}).content.decode()
    assert "onboarding:7:42:1" in filtered and "onboarding:7:50:1" not in filtered
    assert support.get("/admin/outbox/handoff/", {"retrying": "yes", "age": "1h"}).status_code == 200


def test_outbox_records_are_read_only(support, rejected):
    change = support.get(f"/admin/outbox/handoff/{rejected.pk}/change/")
    assert change.status_code == 200 and b'name="_save"' not in change.content
    assert support.post(f"/admin/outbox/handoff/{rejected.pk}/delete/", {"post": "yes"}).status_code == 403
    assert support.get("/admin/outbox/attempt/").status_code == 200


def test_reconcile_admin_action_goes_through_the_service(support, uncertain):
    response = support.post("/admin/outbox/handoff/", {"action": "reconcile", "_selected_action": [uncertain.pk]},
                            follow=True)
    assert b"Reconciled 1 handoff(s); now: 1 delivered" in response.content
    uncertain.refresh_from_db()
    assert uncertain.state == HandoffState.DELIVERED
    event = HandoffEvent.objects.filter(handoff=uncertain).order_by("-id").first()
    assert event.action == "reconcile" and event.actor_label == "support"


def test_assign_admin_action_asks_for_the_operator_then_assigns(world, support, rejected):
    form = support.post("/admin/outbox/handoff/", {"action": "assign", "_selected_action": [rejected.pk]})
    assert form.status_code == 200 and b"oscar" in form.content and b"otto" not in form.content
    done = support.post("/admin/outbox/handoff/", {"action": "assign", "_selected_action": [rejected.pk],
                                                   "apply": "Assign", "owner": str(world["oscar"].pk),
                                                   "reason": "night shift"}, follow=True)
    assert b"Assigned 1 handoff(s) to oscar" in done.content
    rejected.refresh_from_db()
    assert rejected.owner == world["oscar"]
    assert HandoffEvent.objects.filter(handoff=rejected, action="assign", reason="night shift").exists()
    refused = support.post("/admin/outbox/handoff/", {"action": "assign", "_selected_action": [rejected.pk],
                                                      "apply": "Assign", "owner": str(world["otto"].pk)}, follow=True)
    assert b"Skipped 1" in refused.content
    rejected.refresh_from_db()
    assert rejected.owner == world["oscar"]
