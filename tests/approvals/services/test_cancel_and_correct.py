"""Cancel a request in any state, with the behaviour of each state; an approver's correction needs another
approver. Every cancellation keeps a searchable reason code."""

import pytest

from approvals.errors import ApprovalDenied, InvalidPayload
from approvals.models import Request, RequestState
from approvals.services import request_approve, request_cancel, request_correct_by_approver
from outbox.destinations import InProcessDestination
from outbox.dispatch.dispatcher import drain
from outbox.errors import CompensationBlocked
from outbox.models import Handoff, HandoffState
from tests.factories import make_user, onboarding_world

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


@pytest.fixture
def world():
    return onboarding_world()


def approve_42(world, actor="alice") -> Handoff:
    req = Request.objects.filter(workspace_id=7, number=42).order_by("-revision").first()
    return request_approve(
        workspace_id=7,
        number=42,
        revision=req.revision,
        actor=world[actor],
        payload_hash=req.payload_hash,
    )


def test_a_requester_cancels_their_request_before_it_is_decided(world):
    cancelled = request_cancel(
        workspace_id=7, number=42, actor=world["bob"], reason="not needed any more"
    )
    assert (cancelled.state, cancelled.reason_code) == (
        RequestState.CANCELLED,
        "cancelled_by_requester",
    )
    assert Handoff.objects.count() == 0


def test_cancelling_needs_a_reason_and_the_right_person(world):
    with pytest.raises(InvalidPayload):
        request_cancel(workspace_id=7, number=42, actor=world["bob"], reason=" ")
    for outsider in ("alice", "mallory"):
        with pytest.raises(ApprovalDenied):
            request_cancel(workspace_id=7, number=42, actor=world[outsider], reason="mine now")
    assert Request.objects.get(pk=world["request"].pk).state == RequestState.AWAITING_APPROVAL


def test_an_approved_request_with_a_pending_handoff_is_cancelled_with_it(world):
    handoff = approve_42(world)
    cancelled = request_cancel(
        workspace_id=7, number=42, actor=world["olga"], reason="client withdrew"
    )
    assert (cancelled.state, cancelled.reason_code) == (
        RequestState.CANCELLED,
        "cancelled_by_operator",
    )
    handoff.refresh_from_db()
    assert (handoff.state, handoff.reason_code) == (HandoffState.CANCELLED, "cancelled_by_operator")
    assert Handoff.objects.filter(reason_code="cancelled_by_operator").count() == 1, (
        "searchable by reason code"
    )


def test_an_approved_request_whose_step_was_delivered_is_compensated_not_cancelled(world):
    handoff = approve_42(world)
    drain(destination=InProcessDestination())
    with pytest.raises(CompensationBlocked, match="compensate it instead"):
        request_cancel(workspace_id=7, number=42, actor=world["olga"], reason="too late")
    assert Handoff.objects.get(pk=handoff.pk).state == HandoffState.DELIVERED
    assert Request.objects.get(pk=world["request"].pk).state == RequestState.APPROVED


def test_an_approver_corrects_and_another_approver_must_approve(world):
    second = make_user("anne", workspace=world["w7"], roles=("approver",))
    req = world["request"]
    corrected = request_correct_by_approver(
        workspace_id=7,
        number=42,
        revision=1,
        actor=world["alice"],
        payload_hash=req.payload_hash,
        edits={"plan": "enterprise"},
        reason="the contract says enterprise",
    )
    assert (corrected.revision, corrected.state, corrected.corrected_by) == (
        2,
        RequestState.AWAITING_APPROVAL,
        world["alice"],
    )
    assert corrected.payload["plan"] == "enterprise"
    assert Request.objects.get(pk=req.pk).state == RequestState.SUPERSEDED
    with pytest.raises(ApprovalDenied, match="corrected"):
        approve_42(world, actor="alice")
    assert approve_42({**world, "anne": second}, actor="anne").payload["plan"] == "enterprise"


def test_the_request_page_cancels_and_corrects_and_refuses_with_the_reason(world):
    from django.test import Client

    def client(user):
        c = Client()
        c.force_login(world[user])
        return c

    page = client("alice").get("/approvals/7/42/1/").content.decode()
    assert "Correct…" in page and "Cancel this request" not in page
    refused = client("alice").post(
        "/approvals/7/42/1/correct",
        {"payload_hash": world["request"].payload_hash, "field_plan": "enterprise", "reason": ""},
    )
    assert refused.status_code == 422 and b"a reason is required" in refused.content
    done = client("alice").post(
        "/approvals/7/42/1/correct",
        {
            "payload_hash": world["request"].payload_hash,
            "field_plan": "enterprise",
            "reason": "contract",
        },
    )
    assert done.status_code == 302 and done.url == "/approvals/7/42/2/"
    assert client("mallory").post("/approvals/7/42/cancel", {"reason": "x"}).status_code == 404
    assert (
        client("bob").post("/approvals/7/42/cancel", {"reason": "no longer needed"}).status_code
        == 302
    )
    assert (
        Request.objects.get(workspace_id=7, number=42, revision=2).reason_code
        == "cancelled_by_requester"
    )


def test_an_approver_corrects_only_the_fields_shown_as_stored(world):
    """A hidden field (the e-mail), a field not in the payload and a field partly hidden (a note holding an
    address) are refused: an approver once overwrote the hidden e-mail and added keys the form never offered."""
    req = world["request"]
    Request.objects.filter(pk=req.pk).update(
        payload={**req.payload, "notes": "call ops@northwind.example"}
    )
    req.refresh_from_db()
    for edits in (
        {"contact_email": "attacker@evil.example"},
        {"operation": "send_welcome_pack"},
        {"notes": "call [redacted]"},
    ):
        with pytest.raises(InvalidPayload, match="cannot be corrected here"):
            request_correct_by_approver(
                workspace_id=7,
                number=42,
                revision=1,
                actor=world["alice"],
                payload_hash=req.payload_hash,
                edits=edits,
                reason="fix",
            )
    assert not Request.objects.filter(workspace_id=7, number=42, revision=2).exists()


def test_the_correct_form_offers_only_the_fields_shown_as_stored(world):
    from django.test import Client

    req = world["request"]
    Request.objects.filter(pk=req.pk).update(
        payload={**req.payload, "notes": "call ops@northwind.example"}
    )
    alice = Client()
    alice.force_login(world["alice"])
    page = alice.get("/approvals/7/42/1/").content.decode()
    assert 'name="field_plan"' in page and 'name="field_client_name"' in page
    assert 'name="field_contact_email"' not in page and 'name="field_notes"' not in page
