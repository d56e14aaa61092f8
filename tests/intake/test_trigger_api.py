"""POST /approvals/api/triggers: deduplication, revisions in any order, validation, status codes."""

import json
from datetime import UTC, datetime, timedelta

import pytest

from approvals.models import (
    Approval,
    Request,
    RequestEvent,
    RequestState,
    TriggerOutcome,
    TriggerRecord,
    WorkspaceWorkflow,
)
from approvals.services import request_approve
from outbox.models import Handoff, HandoffState
from tests.factories import ONBOARDING_PAYLOAD
from tests.intake.triggers import trigger_document

pytestmark = pytest.mark.django_db


def earlier() -> datetime:
    """Half a minute before now, when the message is signed (not when the module was imported)."""
    return datetime.now(tz=UTC) - timedelta(seconds=30)


def requests_of(reference: str = "crm-1001") -> list[Request]:
    numbers = set(
        TriggerRecord.objects.filter(reference=reference, request__isnull=False).values_list(
            "request__number", flat=True
        )
    )
    return list(Request.objects.filter(workspace_id=7, number__in=numbers).order_by("revision"))


def test_new_trigger_is_accepted_and_awaits_approval_through_received_and_validated(world, send):
    response = send(trigger_document())
    assert response.status_code == 202
    body = response.json()
    assert body["outcome"] == "accepted"
    (request,) = requests_of()
    assert request.number == 43, "numbered after request 42, the newest of workspace 7"
    assert request.state == RequestState.AWAITING_APPROVAL
    assert request.payload == ONBOARDING_PAYLOAD
    assert body["request"] == {
        "workspace_id": 7,
        "workflow": "onboarding",
        "number": 43,
        "revision": 1,
        "state": "awaiting_approval",
        "payload_hash": request.payload_hash,
        "action_key": "onboarding:7:43:1",
    }
    moves = list(
        RequestEvent.objects.filter(request=request)
        .order_by("id")
        .values_list("from_state", "to_state")
    )
    assert moves == [
        ("", "received"),
        ("received", "validated"),
        ("validated", "awaiting_approval"),
    ]
    assert request.requested_by.username == "intake"
    assert not request.requested_by.is_active and not request.requested_by.has_usable_password()
    record = TriggerRecord.objects.get()
    assert (record.outcome, record.status_code, record.request, record.rule_version) == (
        TriggerOutcome.ACCEPTED,
        202,
        request,
        "onboarding-v1",
    )


def test_same_trigger_twice_makes_one_request_and_second_answer_is_duplicate(world, send):
    document = trigger_document()
    first = send(document, msg_id="evt_1", timestamp=earlier())
    events_after_first = RequestEvent.objects.count()
    second = send(document, msg_id="evt_1")
    assert first.status_code == 202
    assert second.status_code == 200
    assert second.json()["duplicate"] is True
    assert second.json()["outcome"] == "duplicate"
    assert second.json()["original_status"] == 202
    assert second.json()["request"] == first.json()["request"], (
        "the original result, the same request"
    )
    assert len(requests_of()) == 1
    assert RequestEvent.objects.count() == events_after_first, "a duplicate changes nothing"
    original, repeat = TriggerRecord.objects.order_by("id")
    assert original.outcome == TriggerOutcome.ACCEPTED
    assert repeat.outcome == TriggerOutcome.DUPLICATE and repeat.duplicate_of == original
    assert repeat.request == original.request


def test_duplicate_of_a_rejected_trigger_repeats_the_rejection(world, send):
    document = trigger_document(payload={"client_name": ""})
    first = send(document, msg_id="evt_bad", timestamp=earlier())
    second = send(document, msg_id="evt_bad")
    assert first.status_code == second.status_code == 422
    assert second.json()["duplicate"] is True
    assert second.json()["reasons"] == first.json()["reasons"]
    assert Request.objects.count() == 1


def test_reused_webhook_id_with_another_body_is_a_conflict_and_changes_nothing(world, send):
    send(trigger_document(), msg_id="evt_1", timestamp=earlier())
    before = list(Request.objects.values_list("pk", "state", "payload_hash"))
    response = send(
        trigger_document(revision=2, payload={**ONBOARDING_PAYLOAD, "plan": "enterprise"}),
        msg_id="evt_1",
    )
    assert response.status_code == 409
    assert "already used" in response.json()["reasons"][0]
    assert list(Request.objects.values_list("pk", "state", "payload_hash")) == before
    assert (
        TriggerRecord.objects.filter(
            outcome=TriggerOutcome.REJECTED_AT_INTAKE, status_code=409
        ).count()
        == 1
    )


def test_revisions_1_3_2_in_that_order_store_2_as_stale_and_ignore_it(world, send):
    payloads = {n: {**ONBOARDING_PAYLOAD, "notes": f"revision {n}"} for n in (1, 2, 3)}
    assert send(trigger_document(revision=1, payload=payloads[1])).status_code == 202
    assert send(trigger_document(revision=3, payload=payloads[3])).status_code == 202
    late = send(trigger_document(revision=2, payload=payloads[2]))
    assert late.status_code == 202
    assert late.json()["outcome"] == "stale"
    assert "older than revision 3" in late.json()["reasons"][0]
    revisions = requests_of()
    assert [(r.revision, r.state, r.payload["notes"]) for r in revisions] == [
        (1, RequestState.SUPERSEDED, "revision 1"),
        (2, RequestState.AWAITING_APPROVAL, "revision 3"),
    ]
    assert Request.objects.filter(payload__notes="revision 2").count() == 0
    stale = TriggerRecord.objects.get(sender_revision=2)
    assert stale.outcome == TriggerOutcome.STALE and stale.request is None
    assert late.json()["current_request"]["revision"] == 2


def test_same_revision_again_under_another_id_is_stale(world, send):
    send(trigger_document(revision=1))
    again = send(trigger_document(revision=1, payload={**ONBOARDING_PAYLOAD, "plan": "starter"}))
    assert again.json()["outcome"] == "stale"
    assert [r.payload["plan"] for r in requests_of()] == ["standard"]


def test_newer_revision_while_awaiting_approval_replaces_it(world, send):
    send(trigger_document(revision=1))
    (old,) = requests_of()
    response = send(
        trigger_document(revision=2, payload={**ONBOARDING_PAYLOAD, "plan": "enterprise"})
    )
    assert response.status_code == 202
    old.refresh_from_db()
    assert old.state == RequestState.SUPERSEDED
    assert old.payload["plan"] == "standard", "the replaced revision keeps what it said"
    new = Request.objects.get(workspace_id=7, number=old.number, revision=2)
    assert new.state == RequestState.AWAITING_APPROVAL
    assert new.payload["plan"] == "enterprise"
    assert new.payload_hash != old.payload_hash
    # The approvals queue shows the new payload and hash only.
    awaiting = Request.objects.filter(number=old.number, state=RequestState.AWAITING_APPROVAL)
    assert list(awaiting.values_list("revision", "payload_hash")) == [(2, new.payload_hash)]


def test_newer_revision_after_approval_needs_its_own_approval_and_key(world, send):
    send(trigger_document(revision=1))
    (approved,) = requests_of()
    handoff = request_approve(
        workspace_id=7,
        number=approved.number,
        revision=1,
        actor=world["alice"],
        payload_hash=approved.payload_hash,
    )
    handoff_before = Handoff.objects.filter(pk=handoff.pk).values().get()

    response = send(
        trigger_document(revision=2, payload={**ONBOARDING_PAYLOAD, "plan": "enterprise"})
    )
    assert response.status_code == 202
    approved.refresh_from_db()
    assert approved.state == RequestState.APPROVED, "an approved revision is never edited"
    assert Handoff.objects.filter(pk=handoff.pk).values().get() == handoff_before, (
        "old handoff untouched"
    )
    assert handoff_before["state"] == HandoffState.PENDING
    new = Request.objects.get(workspace_id=7, number=approved.number, revision=2)
    assert new.state == RequestState.AWAITING_APPROVAL
    assert Approval.objects.filter(request=new).count() == 0

    second = request_approve(
        workspace_id=7,
        number=new.number,
        revision=2,
        actor=world["alice"],
        payload_hash=new.payload_hash,
    )
    assert second.action_key == f"onboarding:7:{new.number}:2" != handoff.action_key
    assert second.payload["plan"] == "enterprise"
    assert Handoff.objects.get(pk=handoff.pk).payload["plan"] == "standard"


def test_every_validation_failure_is_named_and_recorded(world, send):
    WorkspaceWorkflow.objects.create(
        workspace=world["w8"], workflow="onboarding", accepts_triggers=False
    )
    cases = {
        "missing fields and wrong types": (
            {
                "workspace_id": "seven",
                "revision": 0,
                "payload": {"client_name": 5, "plan": "gold"},
                "extra": 1,
            },
            [
                "body: 'reference' is a required property",
                "body: Additional properties are not allowed ('extra' was unexpected)",
                "revision: 0 is less than the minimum of 1",
                "workspace_id: 'seven' is not of type 'integer'",
                "payload: 'contact_email' is a required property",
                "payload.client_name: 5 is not of type 'string'",
                "payload.plan: 'gold' is not one of ['starter', 'standard', 'enterprise']",
            ],
        ),
        "unknown workspace": (
            trigger_document(workspace_id=99),
            ["workspace_id: workspace 99 does not exist"],
        ),
        "workspace refusing the workflow": (
            trigger_document(workspace_id=8),
            ["workspace_id: workspace 8 does not accept onboarding requests"],
        ),
        "unknown workflow": (
            trigger_document(workflow="payroll"),
            ["workflow: unknown workflow 'payroll'"],
        ),
        "payload not an object": (
            trigger_document() | {"payload": ["x"]},
            ["payload: ['x'] is not of type 'object'"],
        ),
    }
    requests_before = Request.objects.count()
    for name, (document, expected) in cases.items():
        response = send(document)
        assert response.status_code == 422, name
        assert sorted(response.json()["reasons"]) == sorted(expected), name
        record = TriggerRecord.objects.order_by("-id").first()
        assert record.outcome == TriggerOutcome.REJECTED_AT_INTAKE, name
        assert sorted(record.reasons) == sorted(expected), name
    assert Request.objects.count() == requests_before
    assert TriggerRecord.objects.count() == len(cases)


def test_malformed_body_is_400_and_writes_nothing(world, post_signed):
    for body in ("{not json", "[1, 2]", '{"revision": NaN}'):
        response = post_signed(body=body)
        assert response.status_code == 400, body[:20]
        assert response.json()["error"] == "malformed_json"
    assert TriggerRecord.objects.count() == 0


def test_nesting_past_the_limit_is_422_before_parsing_and_writes_nothing(world, post_signed):
    response = post_signed(body="[" * 100_000)
    assert response.status_code == 422
    assert response.json()["error"] == "json_too_deep"
    assert TriggerRecord.objects.count() == 0


def test_too_large_body_is_413_and_writes_nothing(world, post_signed, settings):
    settings.INTAKE_MAX_BODY_BYTES = 1024
    document = trigger_document(payload={**ONBOARDING_PAYLOAD, "notes": "x" * 2000})
    response = post_signed(document)
    assert response.status_code == 413
    assert TriggerRecord.objects.count() == 0
    assert Request.objects.count() == 1


def test_overlong_webhook_id_is_400(world, send):
    response = send(trigger_document(), msg_id="m" * 201)
    assert response.status_code == 400
    assert TriggerRecord.objects.count() == 0


def test_get_is_not_allowed(world, client):
    assert client.get("/approvals/api/triggers").status_code == 405


def test_trigger_record_keeps_the_body_and_the_answer(world, send):
    document = trigger_document()
    response = send(document, msg_id="evt_keep")
    record = TriggerRecord.objects.get(webhook_id="evt_keep")
    assert record.document == json.loads(json.dumps(document))
    assert record.response == response.json()
    assert (record.workspace_ref, record.reference, record.sender_revision) == (7, "crm-1001", 1)
