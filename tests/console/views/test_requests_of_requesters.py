"""Requester screens: a new request from the rules in force, my requests with each owner's answer, revise."""

import pytest

from approvals.models import Request, RequestState, Role
from approvals.services import request_approve
from delivery.services import task_status_set
from outbox.dispatch.dispatcher import handoff_deliver
from reconciliation.services import reconciliation_run
from tests.console.clients import client_for
from tests.factories import make_request, make_user

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])

FILLED = {
    "workspace": "7",
    "client_name": "Contoso Ltd",
    "contact_email": "ops@contoso.example",
    "plan": "enterprise",
    "notes": "",
}


def test_new_request_form_is_generated_from_the_rules_in_force(world):
    body = client_for(world["bob"]).get("/approvals/new/").content.decode()
    assert "onboarding-v1" in body
    for field in ("client_name", "contact_email", "plan", "notes"):
        assert f'name="{field}"' in body
    # The plan's choices come from the rules' enum.
    for plan in ("starter", "standard", "enterprise"):
        assert f'<option value="{plan}"' in body


def test_submitting_a_request_records_revision_1_awaiting_approval(world):
    response = client_for(world["bob"]).post("/approvals/new/", FILLED)
    created = Request.objects.get(workspace_id=7, payload__client_name="Contoso Ltd")
    assert (
        response.status_code == 302 and response["Location"] == f"/approvals/7/{created.number}/1/"
    )
    assert created.state == RequestState.AWAITING_APPROVAL and created.requested_by == world["bob"]
    assert created.payload == {
        "client_name": "Contoso Ltd",
        "contact_email": "ops@contoso.example",
        "plan": "enterprise",
    }


def test_invalid_request_shows_each_reason_at_its_field_and_records_nothing(world):
    before = Request.objects.count()
    response = client_for(world["bob"]).post(
        "/approvals/new/", {**FILLED, "client_name": "", "contact_email": "x@", "plan": "platinum"}
    )
    body = response.content.decode()
    assert response.status_code == 422
    assert 'id="id_client_name-error">required<' in body
    assert 'id="id_contact_email-error">&#x27;x@&#x27; is too short' in body
    assert 'id="id_plan-error"' in body
    assert Request.objects.count() == before


def test_new_request_needs_the_requester_role_and_the_refusal_names_the_page(world):
    response = client_for(world["alice"]).get("/approvals/new/")
    assert response.status_code == 403
    assert "Not allowed: New request" in response.content.decode()


def test_requester_cannot_submit_into_a_workspace_where_they_are_not_requester(world):
    response = client_for(world["bob"]).post("/approvals/new/", {**FILLED, "workspace": "8"})
    assert response.status_code == 422
    assert not Request.objects.filter(workspace_id=8).exists()


def _my_row(client) -> str:
    body = client.get("/approvals/mine/").content.decode()
    return body[body.index('id="my-request-7-42"') :].split("</tr>")[0]


def test_my_requests_says_where_the_request_stands_up_to_the_work_reported_done(world):
    bob = client_for(world["bob"])
    row = _my_row(bob)
    assert "Awaiting an approver since" in row and "Northwind Traders" in row
    assert "owner: the approvers who may decide it: alice" in row

    handoff = request_approve(
        workspace_id=7,
        number=42,
        revision=1,
        actor=world["alice"],
        payload_hash=world["request"].payload_hash,
    )
    handoff_deliver(handoff_id=handoff.pk)
    handoff.refresh_from_db()
    row = _my_row(bob)
    assert "Approved by alice at" in row
    # The receipt proves the task, with its time; the work is not reported done yet.
    assert (
        f"task {handoff.destination_id[:8]}… confirmed by the receiver (receipt validated) at"
        in row
    )
    assert "the receiver reports it open (with its receipt at" in row
    assert 'class="status-line yes"' not in row

    # The people doing the task report it done; reconciliation reads the status back.
    task_status_set(action_key=handoff.action_key, status="done")
    assert reconciliation_run().work_statuses_recorded == 1
    row = _my_row(bob)
    assert "done: the work of every step is done" in row
    assert "the receiver reports the work done (read at" in row


def test_my_requests_lists_only_my_own_requests(world):
    carol = make_user("carol", workspace=world["w7"], roles=(Role.REQUESTER,))
    make_request(world["w7"], 60, carol)
    body = client_for(world["bob"]).get("/approvals/mine/").content.decode()
    assert 'id="my-request-7-42"' in body and 'id="my-request-7-60"' not in body


def test_requester_revises_a_request_awaiting_approval_into_a_new_revision(world):
    bob = client_for(world["bob"])
    form = bob.get("/approvals/7/42/revise/").content.decode()
    # Bob typed the e-mail address: his own form starts with it (an approver's screen hides it).
    assert 'value="onboarding@northwind.example"' in form and "Northwind Traders" in form
    response = bob.post(
        "/approvals/7/42/revise/",
        {
            "client_name": "Northwind Traders",
            "contact_email": "onboarding@northwind.example",
            "plan": "enterprise",
            "reason": "bigger plan",
        },
    )
    assert response.status_code == 302 and response["Location"] == "/approvals/7/42/2/"
    revised = Request.objects.get(workspace_id=7, number=42, revision=2)
    assert revised.payload["plan"] == "enterprise"
    assert revised.payload["contact_email"] == "onboarding@northwind.example"
    assert Request.objects.get(pk=world["request"].pk).state == RequestState.SUPERSEDED


def test_only_the_requester_may_revise_and_an_approved_request_is_refused(world):
    assert client_for(world["alice"]).get("/approvals/7/42/revise/").status_code == 403
    request_approve(
        workspace_id=7,
        number=42,
        revision=1,
        actor=world["alice"],
        payload_hash=world["request"].payload_hash,
    )
    response = client_for(world["bob"]).post(
        "/approvals/7/42/revise/",
        {
            "client_name": "X",
            "contact_email": "onboarding@northwind.example",
            "plan": "starter",
            "reason": "late change",
        },
    )
    assert response.status_code == 422
    assert (
        "only a request awaiting approval or rejected can be revised" in response.content.decode()
    )
    assert not Request.objects.filter(workspace_id=7, number=42, revision=2).exists()


def test_revise_of_another_workspaces_request_is_404(world):
    make_request(world["w8"], 5, world["mallory"])
    assert client_for(world["bob"]).get("/approvals/8/5/revise/").status_code == 404


def test_requester_home_leads_to_submitting_and_following_requests(world):
    body = client_for(world["bob"]).get("/").content.decode()
    main = body[body.index("<main") :]
    assert 'href="/approvals/new/">Submit a new request</a>' in main
    assert 'href="/approvals/mine/">follow my requests</a>' in main
