"""Every console URL answers 404 for another workspace's object, and every POST needs a CSRF token."""

import pytest
from django.test import Client

from approvals.models import Approval
from outbox.models import Handoff, HandoffEvent, HandoffState
from tests.console.clients import HTMX, client_for

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])

HANDOFF_POSTS = ["retry", "reconcile", "correct", "cancel", "assign", "acknowledge"]


def handoff_urls(pk: int) -> list[tuple[str, str]]:
    return [("get", f"/handoffs/{pk}/")] + [("post", f"/handoffs/{pk}/{a}") for a in HANDOFF_POSTS]


@pytest.mark.parametrize("htmx", [False, True])
def test_every_handoff_url_is_404_for_another_workspace(world, foreign, htmx):
    Handoff.objects.filter(pk=foreign.pk).update(
        state=HandoffState.NEEDS_ATTENTION, failure_class="transient"
    )
    before = HandoffEvent.objects.filter(handoff=foreign).count()
    # olga is an operator, but of workspace 7; the handoff belongs to workspace 8.
    client = client_for(world["olga"])
    for method, url in handoff_urls(foreign.pk):
        data = {
            "reason": "x",
            "owner": str(world["olga"].pk),
            "confirm_risk": "yes",
            "field_client_name": "X",
        }
        response = getattr(client, method)(
            url, data if method == "post" else {}, **(HTMX if htmx else {})
        )
        assert response.status_code == 404, url
        assert b"onboarding:8:1:1" not in response.content
    assert HandoffEvent.objects.filter(handoff=foreign).count() == before
    assert Handoff.objects.get(pk=foreign.pk).state == HandoffState.NEEDS_ATTENTION


def test_unknown_handoff_is_the_same_404(world):
    client = client_for(world["olga"])
    for method, url in handoff_urls(999999):
        assert getattr(client, method)(url).status_code == 404, url


def test_every_request_url_is_404_for_another_workspace(world, foreign):
    client = client_for(world["olga"])
    assert client.get("/approvals/8/1/1/").status_code == 404
    assert client.post("/approvals/8/1/1/decide", {"decision": "approve"}).status_code == 404
    # An approver of workspace 8 cannot see or decide request 42 of workspace 7.
    mallory = client_for(world["mallory"])
    assert mallory.get("/approvals/7/42/1/").status_code == 404
    assert (
        mallory.post(
            "/approvals/7/42/1/decide",
            {"decision": "approve", "payload_hash": world["request"].payload_hash},
        ).status_code
        == 404
    )
    assert Approval.objects.filter(request=world["request"]).count() == 0


def test_bulk_never_touches_another_workspace(world, foreign):
    Handoff.objects.filter(pk=foreign.pk).update(
        state=HandoffState.NEEDS_ATTENTION, failure_class="transient"
    )
    response = client_for(world["olga"]).post(
        "/handoffs/bulk", {"bulk_action": "retry", "workspace": "8"}, **HTMX
    )
    assert response.status_code == 422 and b"Nothing was done" in response.content
    applied = client_for(world["olga"]).post(
        "/handoffs/bulk",
        {"bulk_action": "retry", "bulk_confirm": "1", "bulk_upto": str(foreign.pk)},
        **HTMX,
    )
    assert applied.status_code == 200
    assert Handoff.objects.get(pk=foreign.pk).state == HandoffState.NEEDS_ATTENTION


def csrf_client(user) -> Client:
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    return client


@pytest.mark.parametrize("action", HANDOFF_POSTS)
def test_handoff_action_without_csrf_token_is_refused(world, rejected, action):
    before = HandoffEvent.objects.filter(handoff=rejected).count()
    response = csrf_client(world["olga"]).post(
        f"/handoffs/{rejected.pk}/{action}", {"reason": "x", "field_client_name": "Y"}, **HTMX
    )
    assert response.status_code == 403
    assert b"CSRF" in response.content
    assert HandoffEvent.objects.filter(handoff=rejected).count() == before


def test_decision_and_bulk_without_csrf_token_are_refused(world, rejected):
    client = csrf_client(world["alice"])
    response = client.post(
        "/approvals/7/42/1/decide",
        {"decision": "approve", "payload_hash": world["request"].payload_hash},
        **HTMX,
    )
    assert response.status_code == 403
    assert Approval.objects.filter(request=world["request"]).count() == 0
    bulk = csrf_client(world["olga"]).post(
        "/handoffs/bulk",
        {"bulk_action": "retry", "bulk_confirm": "1", "bulk_upto": str(rejected.pk)},
        **HTMX,
    )
    assert bulk.status_code == 403


def test_htmx_post_with_the_token_header_from_the_page_is_accepted(world, rejected):
    client = csrf_client(world["olga"])
    page = client.get(f"/handoffs/{rejected.pk}/")
    token = page.context["csrf_token"]
    assert f'"x-csrftoken": "{token}"' in page.content.decode(), (
        "base.html sends the token on every htmx request"
    )
    response = client.post(
        f"/handoffs/{rejected.pk}/acknowledge", {}, HTTP_X_CSRFTOKEN=str(token), **HTMX
    )
    assert response.status_code == 200
    assert HandoffEvent.objects.filter(handoff=rejected, action="acknowledge").exists()
