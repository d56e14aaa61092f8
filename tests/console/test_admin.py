"""Django admin for support staff: read-only outbox records, filters, search, and the safe actions."""

import pytest
from django.contrib import admin
from django.test import Client

from approvals.services import SUPPORT_VIEWS, support_staff_enroll
from delivery.models import ReceiverTask, SeenMessage
from outbox.models import Handoff, HandoffEvent, HandoffState
from tests.factories import make_user

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


@pytest.fixture
def support(world):
    """Support staff as `manage.py demo` makes them: staff in the least-privilege group, not a superuser."""
    user = make_user("support")
    support_staff_enroll(user=user)
    client = Client()
    client.force_login(user)
    return client


def test_changelist_has_the_console_filters_and_searches_by_key_and_request(
    support, rejected, uncertain
):
    page = support.get("/admin/outbox/handoff/", {"q": "request 50"})
    assert page.status_code == 200
    body = page.content.decode()
    assert "onboarding:7:50:1" in body and "onboarding:7:42:1" not in body
    for title in (
        "By state",
        "By retrying (in backoff)",
        "By failure class",
        "By workspace id",
        "By owner",
        "By age",
    ):
        assert title in body
    filtered = support.get("/admin/outbox/handoff/", {"state__exact": "uncertain"}).content.decode()
    assert "onboarding:7:42:1" in filtered and "onboarding:7:50:1" not in filtered
    assert (
        support.get("/admin/outbox/handoff/", {"retrying": "yes", "age": "1h"}).status_code == 200
    )


def test_outbox_records_are_read_only(support, rejected):
    change = support.get(f"/admin/outbox/handoff/{rejected.pk}/change/")
    assert change.status_code == 200 and b'name="_save"' not in change.content
    assert (
        support.post(f"/admin/outbox/handoff/{rejected.pk}/delete/", {"post": "yes"}).status_code
        == 403
    )
    assert support.get("/admin/outbox/attempt/").status_code == 200


def test_reconcile_admin_action_goes_through_the_service(support, uncertain):
    response = support.post(
        "/admin/outbox/handoff/",
        {"action": "reconcile", "_selected_action": [uncertain.pk]},
        follow=True,
    )
    assert b"Reconciled 1 handoff(s); now: 1 delivered" in response.content
    uncertain.refresh_from_db()
    assert uncertain.state == HandoffState.DELIVERED
    event = HandoffEvent.objects.filter(handoff=uncertain).order_by("-id").first()
    assert event.action == "reconcile" and event.actor_label == "support"


def test_assign_admin_action_asks_for_the_operator_then_assigns(world, support, rejected):
    form = support.post(
        "/admin/outbox/handoff/", {"action": "assign", "_selected_action": [rejected.pk]}
    )
    assert form.status_code == 200 and b"oscar" in form.content and b"otto" not in form.content
    done = support.post(
        "/admin/outbox/handoff/",
        {
            "action": "assign",
            "_selected_action": [rejected.pk],
            "apply": "Assign",
            "owner": str(world["oscar"].pk),
            "reason": "night shift",
        },
        follow=True,
    )
    assert b"Assigned 1 handoff(s) to oscar" in done.content
    rejected.refresh_from_db()
    assert rejected.owner == world["oscar"]
    assert HandoffEvent.objects.filter(
        handoff=rejected, action="assign", reason="night shift"
    ).exists()
    refused = support.post(
        "/admin/outbox/handoff/",
        {
            "action": "assign",
            "_selected_action": [rejected.pk],
            "apply": "Assign",
            "owner": str(world["otto"].pk),
        },
        follow=True,
    )
    assert b"Skipped 1" in refused.content
    rejected.refresh_from_db()
    assert rejected.owner == world["oscar"]


def test_support_reads_exactly_the_documented_models_and_adds_nothing(support):
    readable = {(app, model) for app, models in SUPPORT_VIEWS.items() for model in models}
    for model in admin.site._registry:
        key = (model._meta.app_label, model._meta.model_name)
        base = f"/admin/{key[0]}/{key[1]}/"
        assert support.get(base).status_code == (200 if key in readable else 403), key
        assert support.get(base + "add/").status_code == 403, key


def test_support_cannot_create_a_django_q_schedule(support):
    from django_q.models import Schedule

    response = support.post(
        "/admin/django_q/schedule/add/",
        {"func": "subprocess.getoutput", "args": "'id'", "schedule_type": "O", "repeats": "-1"},
    )
    assert response.status_code == 403 and not Schedule.objects.exists()


def test_receiver_tasks_and_replay_records_cannot_be_changed_or_deleted_even_by_a_superuser(world):
    root = Client()
    root.force_login(make_user("root", is_staff=True, is_superuser=True))
    task = ReceiverTask.objects.create(
        action_key="onboarding:7:99:1", payload={"client_name": "x"}, payload_hash="h"
    )
    seen = SeenMessage.objects.create(message_id="msg_1")
    assert (
        root.post(f"/admin/delivery/receivertask/{task.pk}/delete/", {"post": "yes"}).status_code
        == 403
    )
    assert (
        root.post(f"/admin/delivery/receivertask/{task.pk}/change/", {"status": "done"}).status_code
        == 403
    )
    assert (
        root.post(f"/admin/delivery/seenmessage/{seen.pk}/delete/", {"post": "yes"}).status_code
        == 403
    )
    assert ReceiverTask.objects.filter(pk=task.pk, status=task.status).exists()
    assert SeenMessage.objects.filter(pk=seen.pk).exists()


def test_admin_shows_payloads_redacted_like_the_console(world, support):
    from tests.builders import approve

    handoff = approve(
        world,
        number=60,
        payload={
            "client_name": "Acme",
            "contact_email": "ceo@acme.example",
            "plan": "starter",
            "api_key": "k-123",
            "notes": "whsec_QUJD",
        },
    )
    pages = [
        f"/admin/outbox/handoff/{handoff.pk}/change/",
        f"/admin/approvals/request/{handoff.source_id}/change/",
    ]
    for url in pages:
        body = support.get(url).content.decode()
        assert "Acme" in body, url
        for secret in ("ceo@acme.example", "k-123", "whsec_QUJD"):
            assert secret not in body, (url, secret)
        assert "[redacted]" in body
    task = ReceiverTask.objects.create(
        action_key="k:1", payload={"contact_email": "ceo@acme.example"}, payload_hash="h"
    )
    task_page = support.get(f"/admin/delivery/receivertask/{task.pk}/change/")
    assert task_page.status_code == 200 and b"ceo@acme.example" not in task_page.content


def test_admin_search_for_request_42_finds_request_42_only_not_task_ids_containing_42(
    world, support
):
    from outbox.models import Handoff
    from tests.factories import HandoffFactory

    HandoffFactory(number=42, state=HandoffState.DELIVERED, destination_id="f00d-4200-beef")
    HandoffFactory(number=7, state=HandoffState.DELIVERED, destination_id="aa42aa-0000-4242")
    HandoffFactory(number=420, state=HandoffState.DELIVERED, destination_id="bb-1111")
    body = support.get("/admin/outbox/handoff/", {"q": "request 42"}).content.decode()
    keys = set(Handoff.objects.values_list("action_key", flat=True))
    shown = {key for key in keys if key in body}
    assert shown == {"onboarding:7:42:1"}


@pytest.mark.parametrize("owner", ["abc", "9999", "9" * 5000])
def test_assign_admin_action_refuses_an_owner_that_names_no_user_and_keeps_the_owner(
    world, support, rejected, owner
):
    """Only the empty choice means nobody; a posted owner naming no user once unassigned the handoffs."""
    Handoff.objects.filter(pk=rejected.pk).update(owner=world["oscar"])
    done = support.post(
        "/admin/outbox/handoff/",
        {"action": "assign", "_selected_action": [rejected.pk], "apply": "Assign", "owner": owner},
        follow=True,
    )
    assert b"No such operator: nothing was assigned." in done.content
    assert Handoff.objects.get(pk=rejected.pk).owner == world["oscar"]
    assert not HandoffEvent.objects.filter(action="assign").exists()


@pytest.mark.parametrize("selected", ["abc", "\u00b2", "9" * 5000])
def test_an_admin_action_on_a_selection_that_is_not_ids_changes_nothing(
    world, support, rejected, selected
):
    response = support.post(
        "/admin/outbox/handoff/",
        {
            "action": "assign",
            "_selected_action": [selected],
            "apply": "Assign",
            "owner": str(world["oscar"].pk),
        },
        follow=True,
    )
    assert response.status_code == 200
    assert b"nothing was changed" in response.content
    assert not HandoffEvent.objects.filter(action="assign").exists()
