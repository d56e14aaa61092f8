"""Approvals screens: sign-in, home, the queue, a request's detail and its decision."""

import pytest
from django.test import Client

from approvals.models import Approval, Membership, Request, RequestState, Role
from approvals.services import request_revise
from outbox.models import Handoff
from tests.console.clients import HTMX, client_for
from tests.factories import make_request

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


def test_sign_in_with_password_then_sign_out(world):
    client = Client()
    page = client.get("/accounts/login/")
    assert page.status_code == 200 and b"Sign in" in page.content
    response = client.post("/accounts/login/", {"username": "alice", "password": "pw-alice"})
    assert response.status_code == 302
    assert client.get("/").context["user"].get_username() == "alice"
    assert client.post("/accounts/logout/").status_code == 302
    assert client.get("/").status_code == 302


def test_wrong_password_is_refused_with_a_message(world):
    response = Client().post("/accounts/login/", {"username": "alice", "password": "nope"})
    assert response.status_code == 200
    assert b"did not match" in response.content


@pytest.mark.parametrize(
    "url", ["/", "/approvals/", "/approvals/7/42/1/", "/handoffs/", "/handoffs/1/"]
)
def test_anonymous_is_sent_to_sign_in(world, url):
    response = Client().get(url)
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


def test_layout_shows_workspaces_roles_and_counts(world, rejected):
    alice = client_for(world["alice"]).get("/").content.decode()
    assert "Client onboarding" in alice and "approver" in alice
    # Request 42 awaits; request 50 was approved (its handoff was rejected by the receiver).
    assert "1 awaiting decision" in alice
    olga = client_for(world["olga"]).get("/handoffs/").content.decode()
    assert "operator" in olga and "1 need attention" in olga
    assert "Supplier onboarding" not in olga


def test_home_for_a_user_without_workspace_says_so(world):
    from tests.factories import make_user

    response = client_for(make_user("newcomer")).get("/")
    assert b"not a member of any workspace" in response.content


def test_queue_lists_requests_awaiting_decision_oldest_first(world):
    make_request(world["w7"], 43, world["bob"])
    make_request(world["w8"], 9, world["mallory"])
    page = client_for(world["alice"]).get("/approvals/")
    assert [(r.number, r.revision) for r in page.context["requests"]] == [(42, 1), (43, 1)]
    body = page.content.decode()
    assert body.index("request 42") < body.index("request 43")
    assert "Supplier onboarding" not in body


def test_queue_is_empty_for_a_member_without_approver_role(world):
    page = client_for(world["olga"]).get("/approvals/")
    assert list(page.context["requests"]) == []
    assert b"Nothing awaits your decision" in page.content


def test_queue_pages_by_keyset_without_counting(world, django_assert_max_num_queries):
    for number in range(100, 160):
        make_request(world["w7"], number, world["bob"])
    client = client_for(world["alice"])
    with django_assert_max_num_queries(7):
        first = client.get("/approvals/")
    assert len(first.context["requests"]) == 50
    second = client.get("/approvals/", {"after": first.context["next_after"]})
    numbers = [r.number for r in first.context["requests"]] + [
        r.number for r in second.context["requests"]
    ]
    assert sorted(numbers) == [42, *range(100, 160)]
    assert second.context["next_after"] == ""


def test_detail_shows_payload_hash_rules_requester_history_and_mode(world):
    req = world["request"]
    body = client_for(world["alice"]).get("/approvals/7/42/1/").content.decode()
    assert req.payload_hash in body
    assert "onboarding-v1" in body and "passes every rule" in body
    assert "bob" in body and "submitted" in body
    assert "Northwind Traders" in body
    assert "onboarding@northwind.example" not in body, (
        "the contact e-mail is personal data: redacted"
    )
    assert "mode: live" in body
    assert "Approve exactly this payload" in body


def test_approve_with_htmx_records_the_handoff_and_links_to_it(world):
    req = world["request"]
    response = client_for(world["alice"]).post(
        "/approvals/7/42/1/decide",
        {"decision": "approve", "payload_hash": req.payload_hash},
        **HTMX,
    )
    assert response.status_code == 200
    handoff = Handoff.objects.get(action_key="onboarding:7:42:1")
    body = response.content.decode()
    assert 'id="request-detail"' in body and "<html" not in body, (
        "htmx gets the region, not the page"
    )
    assert "Approved" in body and f"/handoffs/{handoff.pk}/" in body
    assert Request.objects.get(pk=req.pk).state == RequestState.APPROVED


def test_approve_without_htmx_redirects_with_a_message(world):
    req = world["request"]
    client = client_for(world["alice"])
    response = client.post(
        "/approvals/7/42/1/decide", {"decision": "approve", "payload_hash": req.payload_hash}
    )
    assert response.status_code == 302
    assert b"Approved" in client.get(response["Location"]).content


def test_reject_needs_a_reason(world):
    req = world["request"]
    client = client_for(world["alice"])
    refused = client.post(
        "/approvals/7/42/1/decide", {"decision": "reject", "payload_hash": req.payload_hash}, **HTMX
    )
    assert refused.status_code == 422 and b"reason is required" in refused.content
    assert Request.objects.get(pk=req.pk).state == RequestState.AWAITING_APPROVAL
    done = client.post(
        "/approvals/7/42/1/decide",
        {
            "decision": "reject",
            "payload_hash": req.payload_hash,
            "reason": "duplicate client",
            "confirm": "1",
        },
        **HTMX,
    )
    assert done.status_code == 200
    assert Approval.objects.get(request=req).reason == "duplicate client"
    assert Request.objects.get(pk=req.pk).state == RequestState.REJECTED


def test_changed_request_shows_the_new_version_instead_of_deciding(world):
    shown_hash = world["request"].payload_hash
    request_revise(
        workspace_id=7,
        number=42,
        payload={**world["request"].payload, "plan": "enterprise"},
        actor=world["bob"],
    )
    response = client_for(world["alice"]).post(
        "/approvals/7/42/1/decide", {"decision": "approve", "payload_hash": shown_hash}, **HTMX
    )
    assert response.status_code == 409
    body = response.content.decode()
    assert "changed since you saw it" in body
    assert 'data-revision="2"' in body and "enterprise" in body
    assert response["HX-Push-Url"] == "/approvals/7/42/2/"
    assert Approval.objects.count() == 0 and Handoff.objects.count() == 0


def test_member_without_approver_role_gets_403_and_nothing_is_decided(world):
    req = world["request"]
    response = client_for(world["olga"]).post(
        "/approvals/7/42/1/decide",
        {"decision": "approve", "payload_hash": req.payload_hash},
        **HTMX,
    )
    assert response.status_code == 403
    assert b"approver role" in response.content
    assert Approval.objects.count() == 0
    assert (
        b"Approve exactly this payload"
        not in client_for(world["olga"]).get("/approvals/7/42/1/").content
    )


def test_requester_cannot_decide_own_request_even_as_approver(world):
    Membership.objects.create(user=world["bob"], workspace=world["w7"], role=Role.APPROVER)
    req = world["request"]
    response = client_for(world["bob"]).post(
        "/approvals/7/42/1/decide",
        {"decision": "approve", "payload_hash": req.payload_hash},
        **HTMX,
    )
    assert response.status_code == 403
    assert b"own request" in response.content
    assert Approval.objects.count() == 0


def test_request_of_another_workspace_is_404(world):
    client = client_for(world["mallory"])
    req = world["request"]
    assert client.get("/approvals/7/42/1/").status_code == 404
    assert (
        client.post(
            "/approvals/7/42/1/decide", {"decision": "approve", "payload_hash": req.payload_hash}
        ).status_code
        == 404
    )
    assert Approval.objects.count() == 0


def test_decide_refuses_get(world):
    assert client_for(world["alice"]).get("/approvals/7/42/1/decide").status_code == 405


@pytest.mark.parametrize("extra", [0, 40])
def test_home_query_count_is_pinned_and_does_not_grow(world, extra, django_assert_max_num_queries):
    from outbox.models import Handoff, HandoffState

    for number in range(200, 200 + extra):
        make_request(world["w7"], number, world["bob"])
    Handoff.objects.bulk_create(
        Handoff(
            action_key=f"onboarding:7:{n}:1",
            workflow="onboarding",
            workspace_id=7,
            source_ref=f"request {n}",
            source_id=1,
            payload={},
            payload_hash="0" * 64,
            state=HandoffState.NEEDS_ATTENTION,
        )
        for n in range(500, 500 + extra)
    )
    client = client_for(world["alice"])
    # Two of them give each row its reason: its destination's hold and its key's live findings.
    with django_assert_max_num_queries(11):
        response = client.get("/")
    assert response.status_code == 200


def test_approved_request_links_its_handoff(world, pending):
    body = client_for(world["alice"]).get("/approvals/7/42/1/").content.decode()
    assert f'href="/handoffs/{pending.pk}/"' in body and "Pending" in body


def test_reject_asks_for_confirmation_before_deciding(world):
    req = world["request"]
    client = client_for(world["alice"])
    asked = client.post(
        "/approvals/7/42/1/decide",
        {"decision": "reject", "payload_hash": req.payload_hash, "reason": "duplicate client"},
        **HTMX,
    )
    body = asked.content.decode()
    assert asked.status_code == 200
    assert "Yes, reject request 42" in body and "duplicate client" in body
    assert not Approval.objects.filter(request=req).exists()
    assert Request.objects.get(pk=req.pk).state == RequestState.AWAITING_APPROVAL


def test_reject_confirmation_works_without_javascript(world):
    req = world["request"]
    client = client_for(world["alice"])
    asked = client.post(
        "/approvals/7/42/1/decide",
        {"decision": "reject", "payload_hash": req.payload_hash, "reason": "duplicate client"},
    )
    assert asked.status_code == 200 and b'id="confirm-reject"' in asked.content
    done = client.post(
        "/approvals/7/42/1/decide",
        {
            "decision": "reject",
            "payload_hash": req.payload_hash,
            "reason": "duplicate client",
            "confirm": "1",
        },
    )
    assert done.status_code == 302
    assert Request.objects.get(pk=req.pk).state == RequestState.REJECTED


def test_queue_rows_show_client_plan_requester_and_age_oldest_first(world):
    make_request(
        world["w7"],
        43,
        world["bob"],
        payload={"client_name": "Contoso", "contact_email": "a@b.example", "plan": "enterprise"},
    )
    response = client_for(world["alice"]).get("/approvals/")
    body = response.content.decode()
    row42 = body[body.index('id="request-7-42-1"') : body.index('id="request-7-43-1"')]
    assert "Northwind Traders" in row42 and "standard" in row42 and "bob" in row42
    row43 = body[body.index('id="request-7-43-1"') :]
    assert "Contoso" in row43.split("</tr>")[0] and "enterprise" in row43.split("</tr>")[0]
    # Oldest first: request 42 was received before 43.
    assert body.index('id="request-7-42-1"') < body.index('id="request-7-43-1"')


def test_replaced_revision_shows_the_difference_field_by_field(world):
    shown_hash = world["request"].payload_hash
    request_revise(
        workspace_id=7,
        number=42,
        payload={**world["request"].payload, "plan": "enterprise"},
        actor=world["bob"],
    )
    response = client_for(world["alice"]).post(
        "/approvals/7/42/1/decide", {"decision": "approve", "payload_hash": shown_hash}, **HTMX
    )
    body = response.content.decode()
    assert response.status_code == 409
    assert "What changed from revision 1 to revision 2" in body
    change = body[body.index('data-field="plan"') :].split("</tr>")[0]
    assert "<del>standard</del>" in change and "<ins>enterprise</ins>" in change
    assert 'data-field="client_name"' not in body


def test_opening_a_revision_that_replaced_another_shows_what_changed(world):
    request_revise(
        workspace_id=7,
        number=42,
        payload={**world["request"].payload, "client_name": "Northwind Ltd"},
        actor=world["bob"],
    )
    body = client_for(world["alice"]).get("/approvals/7/42/2/").content.decode()
    assert "What changed from revision 1 to revision 2" in body
    change = body[body.index('data-field="client_name"') :].split("</tr>")[0]
    assert "<del>Northwind Traders</del>" in change and "<ins>Northwind Ltd</ins>" in change
