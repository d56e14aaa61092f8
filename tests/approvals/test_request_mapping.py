"""Request mapping, approved as it will be sent (issue 35): the approver sees each routed step's rendered
request and the decision binds to their hash; each handoff freezes its request, and a CRM-like API in a process
of its own receives exactly that, whatever mapping is published afterwards."""

import html

import pytest
from django.urls import reverse

from approvals.errors import StaleRevision
from approvals.models import Approval, Request
from approvals.route_requests import route_requests, route_requests_hash
from approvals.rules import rules_for
from approvals.services import request_approve
from approvals.services.requests import request_revise_by_requester
from outbox.destinations import destination_named
from outbox.dispatch.dispatcher import handoff_deliver
from outbox.models import Handoff, HandoffState
from outbox.payloads import payload_hash
from tests.approvals.request_mapping_world import (
    ACCOUNT,
    CONTACT,
    apply,
    crm_row,
    mapping_world,
    step,
    workflows,
)
from tests.console.clients import HTMX, client_for
from tests.outbox.destinations.mapped_request_server import mapped_request_server_start

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


@pytest.fixture
def world(monkeypatch):
    return mapping_world(monkeypatch)


@pytest.fixture
def crm(world):
    server = mapped_request_server_start()
    crm_row(server.url)
    yield server
    server.stop()


def approve(world, requests_hash: str | None = None) -> Handoff:
    request = Request.objects.get(workspace=world["w7"], number=42, revision=1)
    return request_approve(
        workspace_id=7,
        number=42,
        revision=1,
        actor=world["alice"],
        payload_hash=request.payload_hash,
        requests_hash=requests_hash,
    )


def test_the_approval_page_shows_what_each_destination_will_receive(world):
    crm_row()
    apply(world, workflows(step("create_account", ACCOUNT), step("create_contact", CONTACT)))

    page = html.unescape(
        client_for(world["alice"])
        .get(reverse("approvals:detail", args=[7, 42, 1]))
        .content.decode()
    )

    assert "What each destination will receive" in page
    assert "Step create_account → crm · <code>POST /services/data/sobjects/Account/</code>" in page
    assert '"Name": "Northwind Traders"' in page
    assert '"Plan__c": "standard"' in page
    assert "POST /services/data/sobjects/Contact/?source=handoff" in page
    assert '"slug": "standard-Northwind Traders"' in page
    # Redacted the way payloads are: the contact's e-mail address is not on the page.
    assert "onboarding@northwind.example" not in page
    expected = route_requests_hash(
        route_requests(world["request"].payload, rules_for("onboarding").steps)
    )
    assert f'name="requests_hash" value="{expected}"' in page


def test_approving_with_a_stale_requests_hash_is_refused_and_nothing_is_written(world):
    crm_row()
    apply(world, workflows(step("create_account", ACCOUNT)))
    shown = route_requests_hash(
        route_requests(world["request"].payload, rules_for("onboarding").steps)
    )
    # The rules change while the page is open: another mapping.
    apply(world, workflows(step("create_account", {**ACCOUNT, "query": {"v": "2"}})))

    with pytest.raises(StaleRevision, match="the requests hash does not match"):
        approve(world, requests_hash=shown)

    assert not Approval.objects.exists()
    assert not Handoff.objects.exists()
    assert Request.objects.get(pk=world["request"].pk).state == "awaiting_approval"


def test_a_decide_form_without_the_requests_hash_is_stale_once_a_step_is_mapped(world):
    crm_row()
    apply(world, workflows(step("create_account", ACCOUNT)))
    answer = client_for(world["alice"]).post(
        reverse("approvals:decide", args=[7, 42, 1]),
        {"decision": "approve", "payload_hash": world["request"].payload_hash, "reason": "ok"},
        **HTMX,
    )
    assert answer.status_code == 409
    assert (
        "what each destination will receive changed since it was shown" in answer.content.decode()
    )
    assert not Approval.objects.exists()
    assert not Handoff.objects.exists()


def test_the_decision_stores_the_rendered_requests_and_their_hash(world):
    crm_row()
    apply(world, workflows(step("create_account", ACCOUNT), step("create_contact", CONTACT)))
    routes = route_requests(world["request"].payload, rules_for("onboarding").steps)

    approve(world, requests_hash=route_requests_hash(routes))

    approval = Approval.objects.get()
    assert approval.requests_hash == route_requests_hash(routes)
    assert approval.requests == [route.stored() for route in routes]
    assert approval.requests[0]["request"]["body"] == {
        "Name": "Northwind Traders",
        "Plan__c": "standard",
        "Description": "",
    }


# --- Frozen in the handoff, and sent as it is ---------------------------------------------------------


def test_the_handoff_sends_its_frozen_request_whatever_is_published_later(world, crm):
    apply(world, workflows(step("create_account", ACCOUNT), step("create_contact", CONTACT)))
    routes = route_requests(world["request"].payload, rules_for("onboarding").steps)
    first = approve(world, requests_hash=route_requests_hash(routes))
    account_body = {"Name": "Northwind Traders", "Plan__c": "standard", "Description": ""}
    assert first.request["body"] == account_body
    assert first.payload_hash == payload_hash(account_body)
    # A new rule version maps both steps otherwise: the approved instance keeps what was approved.
    other = {"path": {"object": "Lead"}, "body": {"LastName": {"$": "client_name"}}}
    apply(world, workflows(step("create_account", other), step("create_contact", other)))

    assert handoff_deliver(handoff_id=first.pk, destination=destination_named("crm")) == (
        HandoffState.DELIVERED
    )
    second = Handoff.objects.get(action_key=f"{first.instance_key}:create_contact")
    assert handoff_deliver(handoff_id=second.pk) == HandoffState.DELIVERED

    account, contact = crm.writes()
    assert account["path"] == "/services/data/sobjects/Account/"
    assert account["body"] == account_body
    assert contact["path"] == "/services/data/sobjects/Contact/?source=handoff"
    assert contact["body"] == {
        "properties": {
            "email": "onboarding@northwind.example",
            "company": "Northwind Traders",
            "slug": "standard-Northwind Traders",
        }
    }
    assert [w["headers"]["idempotency-key"] for w in crm.writes()] == [
        first.action_key,
        second.action_key,
    ]
    # One record per key at the provider.
    assert len(crm.state()["records"]) == 2
    assert Handoff.objects.get(pk=first.pk).destination_id == "rec_1"


def test_a_revision_is_approved_with_a_new_rendering_of_its_own(world, crm):
    apply(world, workflows(step("create_account", ACCOUNT)))
    steps = rules_for("onboarding").steps
    shown_for_1 = route_requests_hash(route_requests(world["request"].payload, steps))
    revision_2 = request_revise_by_requester(
        workspace_id=7,
        number=42,
        payload={**world["request"].payload, "client_name": "Northwind Ltd"},
        actor=world["bob"],
        reason="the company's registered name",
    )
    ids = {"workspace_id": 7, "number": 42, "revision": revision_2.revision}

    with pytest.raises(StaleRevision):
        request_approve(
            **ids,
            actor=world["alice"],
            payload_hash=revision_2.payload_hash,
            requests_hash=shown_for_1,
        )
    handoff = request_approve(
        **ids,
        actor=world["alice"],
        payload_hash=revision_2.payload_hash,
        requests_hash=route_requests_hash(route_requests(revision_2.payload, steps)),
    )
    assert handoff_deliver(handoff_id=handoff.pk) == HandoffState.DELIVERED

    [write] = crm.writes()
    assert write["body"]["Name"] == "Northwind Ltd"
    assert handoff.request["body"]["Name"] == "Northwind Ltd"
