"""Erasure on request (issue 39, GDPR article 17): one subject's personal fields erased from requests,
decisions' rendered requests, handoffs, attempts, events and the archive; keys, hashes, receipts and
decisions kept; the erased handoff still settled by lookup and reconciled by key and hash; a later search
finds nothing; the proof holds none of the erased data. Both backends."""

import json
from datetime import timedelta

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.db.models import F
from django.forms.models import model_to_dict
from django.urls import reverse

from approvals.management.commands.demo import ONBOARDING_STEPS, ONBOARDING_THREE_STEPS_SCHEMA
from approvals.models import Approval, Request, RequestEvent
from approvals.services.erasure import ErasureRefused, subject_erase, subject_named
from approvals.services.rule_versions import rule_version_publish
from delivery import services as receiver
from delivery.models import ReceiverTask
from incidents.models import Incident, IncidentEvent
from incidents.services.incidents import incidents_sync
from outbox.clock import db_time
from outbox.destinations import InProcessDestination
from outbox.dispatch.dispatcher import drain, handoff_deliver
from outbox.errors import InvalidTransition
from outbox.models import (
    ERASED,
    ArchivedHandoff,
    Attempt,
    Erasure,
    Handoff,
    HandoffEvent,
    HandoffKind,
    HandoffState,
)
from outbox.services import handoff_record, handoff_retry, instance_compensate
from outbox.services.case_holds import case_hold
from outbox.services.lookup_limits import LimitedLookups
from outbox.services.retention import handoffs_archive_settled
from outbox.settlement import passes as settling
from reconciliation.services.key_check import handoff_reconcile_now
from tests.builders import approve
from tests.console.clients import client_for
from tests.factories import ONBOARDING_PAYLOAD, make_user
from tests.oracle.oracle import assert_pages_true, claims_in
from tests.oracle.truth import Truth

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
S = HandoffState
EMAIL = ONBOARDING_PAYLOAD["contact_email"]
NAME = ONBOARDING_PAYLOAD["client_name"]


@pytest.fixture
def eraser(world):
    return make_user("erin", permissions=["outbox.erase_personal_data"])


def _lost_answer(world) -> Handoff:
    """Request 42 approved; its call reached the receiver but the answer was lost (uncertain), an attempt's
    detail and an event's reason quoting the subject's e-mail."""
    handoff = approve(world)
    receiver.task_create_idempotent(action_key=handoff.action_key, payload=handoff.payload)
    Handoff.objects.filter(pk=handoff.pk).update(state=S.UNCERTAIN, attempts=1)
    Attempt.objects.create(
        handoff=handoff,
        number=1,
        fencing_epoch=1,
        worker="dispatcher-a",
        started_at=db_time(),
        detail=f"timed out after sending contact {EMAIL.upper()}",
    )
    HandoffEvent.objects.create(
        handoff=handoff,
        to_state=S.UNCERTAIN,
        actor_label="dispatcher",
        reason=f"lost: {EMAIL} of {NAME}",
    )
    return Handoff.objects.get(pk=handoff.pk)


def _everything_stored(handoff: Handoff) -> str:
    rows = [
        *Request.objects.filter(workspace_id=7, number=42).values(),
        *Approval.objects.filter(request__number=42).values(),
        *RequestEvent.objects.filter(request__number=42).values(),
        *Handoff.objects.filter(pk=handoff.pk).values(),
        *Attempt.objects.filter(handoff=handoff).values(),
        *HandoffEvent.objects.filter(handoff=handoff).values(),
    ]
    return json.dumps(rows, default=str).lower()


def test_an_erased_handoff_is_settled_by_lookup_and_reconciled_by_key_and_hash(world, eraser):
    handoff = _lost_answer(world)
    assert EMAIL in _everything_stored(handoff)

    [erasure] = subject_erase(
        subject=subject_named(email=EMAIL.upper()), reason="ticket 4711", actor=eraser
    )

    stored = _everything_stored(handoff)
    assert EMAIL not in stored and NAME.lower() not in stored
    after = Handoff.objects.get(pk=handoff.pk)
    assert after.payload["contact_email"] == ERASED and after.payload["plan"] == "standard"
    assert (after.action_key, after.payload_hash) == (handoff.action_key, handoff.payload_hash)
    assert after.erasure_id == erasure.pk
    assert Request.objects.get(workspace_id=7, number=42).payload_hash == handoff.payload_hash

    # Settled by a lookup of its key: the receiver's task has the same payload hash.
    destination = LimitedLookups(InProcessDestination(), worker="settle")
    settled = settling.settle_pass(destination=destination, worker="settle", limit=5)
    assert settled.outcomes == {S.DELIVERED: 1}
    delivered = Handoff.objects.get(pk=handoff.pk)
    assert delivered.state == S.DELIVERED
    assert delivered.receipt["payload_hash"] == handoff.payload_hash
    assert ReceiverTask.objects.filter(action_key=handoff.action_key).count() == 1

    check = handoff_reconcile_now(
        handoff_id=handoff.pk, actor=world["olga"], destination=InProcessDestination()
    )
    assert check.found is True and check.problems == ()


def test_a_later_search_does_not_find_the_subject(world, eraser):
    handoff = _lost_answer(world)
    client = client_for(world["olga"])
    assert f"/handoffs/{handoff.pk}/" in client.get("/handoffs/", {"q": EMAIL}).content.decode()

    subject_erase(subject=subject_named(email=EMAIL), reason="ticket 4711", actor=eraser)

    for typed in (EMAIL, "northwind"):
        page = client.get("/handoffs/", {"q": typed}).content.decode()
        assert f"/handoffs/{handoff.pk}/" not in page
    # Found by its key still.
    assert f"/handoffs/{handoff.pk}/" in client.get("/handoffs/", {"q": "7:42"}).content.decode()


def test_the_proof_counts_what_was_erased_and_holds_none_of_it(world, eraser):
    _lost_answer(world)
    [erasure] = subject_erase(
        subject=subject_named(business_id=f"client_name={NAME}"),
        reason="customer asked on the phone",
        actor=eraser,
    )
    proof = json.dumps(model_to_dict(Erasure.objects.get(pk=erasure.pk)), default=str).lower()
    assert EMAIL not in proof and "northwind" not in proof
    assert erasure.erased_by == eraser and erasure.workspace_id == 7
    assert erasure.counts == {
        "requests": 1,
        "decisions": 1,
        "request_events": 0,
        "triggers": 0,
        "handoffs": 1,
        "attempts": 1,
        "handoff_events": 1,
        "status_events": 0,
        "case_holds": 0,
        "archived_handoffs": 0,
    }


def test_erasure_is_refused_while_the_subjects_handoff_may_still_be_sent(world, eraser):
    handoff = approve(world)  # pending: its payload is still to be sent
    with pytest.raises(ErasureRefused, match=handoff.action_key):
        subject_erase(subject=subject_named(email=EMAIL), reason="ticket", actor=eraser)
    assert Handoff.objects.get(pk=handoff.pk).payload["contact_email"] == EMAIL
    assert not Erasure.objects.exists()


def test_erasure_is_refused_while_the_subjects_request_awaits_a_decision(world, eraser):
    # Request 42 of the world awaits approval.
    with pytest.raises(ErasureRefused, match="request 42 revision 1 of workspace 7: awaits"):
        subject_erase(subject=subject_named(email=EMAIL), reason="ticket", actor=eraser)
    assert Request.objects.get(number=42).payload["contact_email"] == EMAIL


def test_manage_erase_needs_the_permission_and_names_a_bad_subject(world, eraser):
    _lost_answer(world)
    with pytest.raises(CommandError, match="may not erase personal data"):
        call_command("erase", "--email", EMAIL, "--reason", "ticket", "--as", "olga")
    with pytest.raises(CommandError, match="business_id: FIELD=VALUE"):
        call_command("erase", "--business-id", "client_name", "--reason", "ticket", "--as", "erin")
    assert Request.objects.get(number=42).payload["contact_email"] == EMAIL
    call_command("erase", "--email", EMAIL, "--reason", "ticket 4711", "--as", "erin")
    assert Request.objects.get(number=42).payload["contact_email"] == ERASED


def _erased_and_settled(world, eraser) -> Handoff:
    handoff = _lost_answer(world)
    subject_erase(subject=subject_named(email=EMAIL), reason="ticket 4711", actor=eraser)
    settling.settle_pass(
        destination=LimitedLookups(InProcessDestination(), worker="s"), worker="s", limit=5
    )
    return Handoff.objects.get(pk=handoff.pk)


def test_every_screen_that_showed_the_subject_says_erased_on_by_reason_and_the_oracle_agrees(
    world, eraser
):
    handoff = _erased_and_settled(world, eraser)
    request = Request.objects.get(workspace_id=7, number=42)
    pages = {}
    for user, url in (
        (world["bob"], reverse("approvals:detail", args=[7, 42, 1])),
        (world["alice"], reverse("approvals:detail", args=[7, 42, 1])),
        (world["olga"], reverse("outbox:detail", args=[handoff.pk])),
    ):
        response = client_for(user).get(url)
        assert response.status_code == 200, url
        pages[f"{user} {url}"] = response.content.decode()
    # The oracle reads the live rows: checked before the handoff leaves them for the archive.
    assert assert_pages_true(pages, Truth()) > 0
    Handoff.objects.filter(pk=handoff.pk).update(updated_at=F("updated_at") - timedelta(days=400))
    handoffs_archive_settled(older_than_days=1)
    archived = client_for(world["olga"]).get(reverse("outbox:archived", args=[handoff.pk]))
    assert archived.status_code == 200
    pages["olga archived"] = archived.content.decode()
    assert assert_pages_true({"olga archived": pages["olga archived"]}, Truth()) > 0

    for key, page in pages.items():
        assert "Personal data erased on" in page, key
        assert "by erin, reason: ticket 4711" in page, key
        assert EMAIL not in page.lower() and "northwind" not in page.lower(), key
    seen = {c.name for html in pages.values() for c in claims_in("", html)}
    assert {"request.erased", "handoff.erased", "archived.erased"} <= seen
    assert ArchivedHandoff.objects.get(pk=handoff.pk).erasure_id == request.erasure_id


def test_an_archived_handoff_erased_later_loses_the_subject_from_its_history(world, eraser):
    handoff = _lost_answer(world)
    settling.settle_pass(
        destination=LimitedLookups(InProcessDestination(), worker="s"), worker="s", limit=5
    )
    Handoff.objects.filter(pk=handoff.pk).update(updated_at=F("updated_at") - timedelta(days=400))
    handoffs_archive_settled(older_than_days=1)
    assert EMAIL in json.dumps(ArchivedHandoff.objects.get(pk=handoff.pk).history).lower()

    [erasure] = subject_erase(subject=subject_named(email=EMAIL), reason="ticket", actor=eraser)

    row = ArchivedHandoff.objects.get(pk=handoff.pk)
    assert EMAIL not in json.dumps([row.history, row.request]).lower()
    assert (row.erasure_id, row.payload_hash) == (erasure.pk, handoff.payload_hash)
    assert erasure.counts["archived_handoffs"] == 1


def test_an_erased_handoff_the_receiver_never_got_is_not_sent_again(world, eraser):
    handoff = approve(world)
    Handoff.objects.filter(pk=handoff.pk).update(state=S.UNCERTAIN, attempts=1)
    subject_erase(subject=subject_named(email=EMAIL), reason="ticket", actor=eraser)

    settling.settle_pass(
        destination=LimitedLookups(InProcessDestination(), worker="s"), worker="s", limit=5
    )

    after = Handoff.objects.get(pk=handoff.pk)
    assert (after.state, after.reason_code) == (S.NEEDS_ATTENTION, "erased_not_sent")
    with pytest.raises(InvalidTransition):
        handoff_retry(handoff_id=handoff.pk, actor=world["olga"])
    assert not ReceiverTask.objects.filter(action_key=handoff.action_key).exists()


def test_the_audit_export_records_the_erasure_and_no_longer_holds_the_subject(
    world, eraser, tmp_path
):
    _lost_answer(world)
    since = (db_time() - timedelta(hours=1)).isoformat()
    before = tmp_path / "before.jsonl"
    call_command(
        "audit_export",
        "--workspace=7",
        f"--from={since}",
        "--format=jsonl",
        "--as=olga",
        f"--output={before}",
    )
    # E-mail addresses are masked in every export; the client's name was not.
    assert "northwind" in before.read_text().lower()

    subject_erase(subject=subject_named(email=EMAIL), reason="ticket 4711", actor=eraser)

    after = tmp_path / "after.jsonl"
    call_command(
        "audit_export",
        "--workspace=7",
        f"--from={since}",
        "--format=jsonl",
        "--as=olga",
        f"--output={after}",
    )
    assert "northwind" not in after.read_text().lower()
    [erasure] = [
        r for r in map(json.loads, after.read_text().splitlines()) if r["kind"] == "erasure"
    ]
    assert (erasure["actor"], erasure["reason"]) == ("erin", "ticket 4711")
    assert "handoffs 1" in erasure["after"]


def test_a_handoff_of_another_workflow_with_the_same_source_id_is_not_the_subjects(world, eraser):
    # An incident's notification names its incident by source_id: the same number as request 42's id.
    request = Request.objects.get(workspace_id=7, number=42)
    _lost_answer(world)
    other = handoff_record(
        workflow="incident_notifications",
        workspace_id=7,
        source_ref="incident 1 notification 1",
        source_id=request.pk,
        action_key="incident:7:1:1:1",
        payload={"to": EMAIL, "subject": "incident 1", "body": "see the console"},
    )

    subject_erase(subject=subject_named(email=EMAIL), reason="ticket 4711", actor=eraser)

    after = Handoff.objects.get(pk=other.pk)
    assert (after.payload["to"], after.erasure_id) == (EMAIL, None)


def test_erasure_reaches_a_workflows_plan_and_its_ordering_keys(world, eraser):
    """A step's plan carries the later steps' frozen requests and ordering keys (`outbox/steps.py`); an
    ordering key is a payload value (here the contact e-mail). Both are stored on every step's row."""
    ordered = [{**step, "order_by": {"field": "contact_email"}} for step in ONBOARDING_STEPS]
    rule_version_publish(
        workflow="onboarding", schema=ONBOARDING_THREE_STEPS_SCHEMA, steps=ordered, actor=None
    )
    first = approve(world)
    drain()
    steps = Handoff.objects.filter(instance_key=first.instance_key).order_by("step_index")
    assert [s.state for s in steps] == [S.DELIVERED] * 3
    assert EMAIL in json.dumps(list(steps.values("plan", "order_key"))).lower()

    [erasure] = subject_erase(subject=subject_named(email=EMAIL), reason="ticket", actor=eraser)

    assert EMAIL not in json.dumps(list(steps.values("plan", "order_key")), default=str).lower()
    steps = steps.all()
    assert {s.erasure_id for s in steps} == {erasure.pk}
    # One subject's erased steps still share one ordering key, another subject's none of it.
    assert len({s.order_key for s in steps} | {e["order_key"] for e in steps[0].plan}) == 1
    assert [e["key"] for e in steps[0].plan] == [s.action_key for s in steps[1:]]


def approve_three_steps(world) -> Handoff:
    """Request 43 approved under the demo's three-step onboarding: its first step."""
    rule_version_publish(
        workflow="onboarding",
        schema=ONBOARDING_THREE_STEPS_SCHEMA,
        steps=ONBOARDING_STEPS,
        actor=None,
    )
    return approve(world)


def test_the_next_step_of_an_erased_step_settled_later_goes_to_a_person_never_sent(world, eraser):
    """Step 1's answer was lost (uncertain) when the subject was erased; settlement then finds the receiver's
    task and records it delivered, which records step 2 from step 1's (erased) payload. Sent, it would carry
    "[erased]" where the client's data was: it goes to a person instead, marked with the erasure."""
    first = approve_three_steps(world)
    receiver.task_create_idempotent(action_key=first.action_key, payload=first.payload)
    Handoff.objects.filter(pk=first.pk).update(state=S.UNCERTAIN, attempts=1)
    [erasure] = subject_erase(subject=subject_named(email=EMAIL), reason="ticket", actor=eraser)

    before = db_time()
    settling.settle_pass(
        destination=LimitedLookups(InProcessDestination(), worker="s"), worker="s", limit=5
    )
    drain()

    assert Handoff.objects.get(pk=first.pk).state == S.DELIVERED
    second = Handoff.objects.get(instance_key=first.instance_key, step_index=1)
    assert (second.state, second.reason_code, second.attempts) == (
        S.NEEDS_ATTENTION,
        "erased_not_sent",
        0,
    )
    # Its needs-attention clocks, set by the one move of a handoff (`move_changes`), database clock.
    assert before <= second.attention_since <= db_time()
    sla = timedelta(minutes=settings.HANDOFF_SLA_MINUTES)
    assert abs(second.sla_due_at - second.attention_since - sla) < timedelta(seconds=1)
    assert (second.acknowledged_at, second.lease_owner, second.lease_expires_at) == (None, "", None)
    assert second.erasure_id == erasure.pk
    assert not ReceiverTask.objects.filter(action_key=second.action_key).exists()
    assert not Handoff.objects.filter(instance_key=first.instance_key, step_index=2).exists()
    with pytest.raises(InvalidTransition):
        handoff_retry(handoff_id=second.pk, actor=world["olga"])


def test_a_compensation_recorded_from_an_erased_one_goes_to_a_person_never_sent(world, eraser):
    """The instance was compensated before the erasure, and the first compensation's answer was lost
    (uncertain: it does not refuse the erasure). Settled delivered after it, that compensation records the
    next one from its own, erased, payload: the receiver's undo (a task holding the whole payload) would send
    "[erased]" where the client's data was, so it goes to a person, marked with the erasure, never sent."""
    first = approve_three_steps(world)
    drain()
    instance_compensate(instance_key=first.instance_key, actor=world["olga"], reason="client left")
    undo = Handoff.objects.get(instance_key=first.instance_key, kind=HandoffKind.COMPENSATION)
    receiver.task_create_idempotent(action_key=undo.action_key, payload=undo.payload)
    Handoff.objects.filter(pk=undo.pk).update(state=S.UNCERTAIN, attempts=1)
    [erasure] = subject_erase(subject=subject_named(email=EMAIL), reason="ticket", actor=eraser)

    settling.settle_pass(
        destination=LimitedLookups(InProcessDestination(), worker="s"), worker="s", limit=5
    )
    drain()

    assert Handoff.objects.get(pk=undo.pk).state == S.DELIVERED
    second = Handoff.objects.get(action_key=f"{first.instance_key}:create_client:compensate")
    assert (second.state, second.reason_code, second.erasure_id) == (
        S.NEEDS_ATTENTION,
        "erased_not_sent",
        erasure.pk,
    )
    assert not ReceiverTask.objects.filter(action_key=second.action_key).exists()
    recorded = HandoffEvent.objects.get(handoff=second, from_state="")
    assert "its undo would send [erased] for client_name, contact_email" in recorded.reason


def test_an_operators_hold_of_the_subjects_case_loses_the_subject_from_its_reason(world, eraser):
    """Erasure x hold one case: an operator holds a handoff needing attention (which does not refuse an
    erasure) with a reason naming the subject; the erasure left the hold's reason as typed, and the
    handoff page went on showing it in its hold line, beside "Personal data erased on"."""
    email = "jane.doe@tailspin.example"
    payload = {**ONBOARDING_PAYLOAD, "client_name": "   ", "contact_email": email}
    handoff = approve(world, 62, payload=payload)
    handoff_deliver(handoff_id=handoff.pk)
    assert Handoff.objects.get(pk=handoff.pk).state == S.NEEDS_ATTENTION
    hold = case_hold(
        handoff_id=handoff.pk,
        actor=world["olga"],
        reason=f"calling {email} about the name",
        whole_case=True,
    )

    [erasure] = subject_erase(
        subject=subject_named(email=email), reason="ticket 4713", actor=eraser
    )

    hold.refresh_from_db()
    assert email not in hold.reason.lower() and hold.reason == f"calling {ERASED} about the name"
    assert erasure.counts["case_holds"] == 1
    page = client_for(world["olga"]).get(reverse("outbox:detail", args=[handoff.pk]))
    text = page.content.decode().lower()
    assert "personal data erased on" in text and "is held by olga" in text
    assert email not in text


def test_an_incident_of_the_subjects_failure_loses_the_subject_from_its_evidence(world, eraser):
    """An erasure met an incident: the handoff's last error was erased, but the incident opened from it
    kept the receiver's answer quoting the subject's name as its first and latest evidence (what its page and
    its alerts say), and its timeline kept a person's note naming them; only e-mail addresses were masked."""
    handoff = approve(world)
    Handoff.objects.filter(pk=handoff.pk).update(
        state=S.NEEDS_ATTENTION,
        attempts=1,
        attention_since=db_time(),
        failure_class="permanent",
        reason_code="rejected",
        last_error=f"422: a client named {NAME} exists already",
    )
    incidents_sync()
    [incident] = Incident.objects.all()
    assert NAME in incident.evidence_first and NAME in incident.evidence_last
    IncidentEvent.objects.create(
        incident=incident, action="acknowledged", actor_label="olga", note=f"calling {NAME.upper()}"
    )
    subject_erase(subject=subject_named(email=EMAIL), reason="ticket 4711", actor=eraser)
    incident.refresh_from_db()
    for text in (incident.evidence_first, incident.evidence_last, incident.title):
        assert NAME not in text and NAME.lower() not in text.lower()
    assert f"a client named {ERASED} exists" in incident.evidence_last
    notes = IncidentEvent.objects.filter(incident=incident).values_list("note", flat=True)
    assert not [note for note in notes if NAME.lower() in note.lower()]
    assert f"calling {ERASED}" in notes
