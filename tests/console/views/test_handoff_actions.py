"""Handoff actions through the console: each one, each role, the audit trail, the risk confirmation."""

from datetime import timedelta

import pytest
from django.utils import timezone

from approvals.models import Request, RequestState
from delivery.models import ReceiverTask
from outbox.models import FailureClass, Handoff, HandoffEvent, HandoffState
from outbox.services.destination_windows import destination_pause_by_operator
from tests.console.clients import HTMX, client_for

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
S = HandoffState


def post(user, handoff, action, data=None, htmx=True):
    return client_for(user).post(
        f"/handoffs/{handoff.pk}/{action}", data or {}, **(HTMX if htmx else {})
    )


def last_event(handoff) -> HandoffEvent:
    return HandoffEvent.objects.filter(handoff=handoff).order_by("-id").first()


def exhausted(world, pending) -> Handoff:
    Handoff.objects.filter(pk=pending.pk).update(
        state=S.NEEDS_ATTENTION,
        failure_class=FailureClass.TRANSIENT,
        reason_code="retries_exhausted",
        attempts=6,
    )
    return Handoff.objects.get(pk=pending.pk)


def test_retry_sends_now_and_shows_the_delivered_result(world, pending):
    handoff = exhausted(world, pending)
    response = post(world["olga"], handoff, "retry", {"reason": "receiver is back"})
    assert response.status_code == 200
    body = response.content.decode()
    handoff.refresh_from_db()
    assert handoff.state == S.DELIVERED
    assert f"Sent: delivered as receiver task {handoff.destination_id}." in body
    assert 'id="handoff-panel"' in body and "<html" not in body
    retry = HandoffEvent.objects.get(handoff=handoff, action="retry")
    assert retry.actor == world["olga"] and retry.reason == "receiver is back"


def test_retry_that_fails_again_says_so(world, rejected):
    # A permanent rejection, retried as is, fails the same way: the panel must say it, not "queued".
    response = post(world["olga"], rejected, "retry")
    assert response.status_code == 200
    assert b"failed again (permanent: payload_invalid)" in response.content
    rejected.refresh_from_db()
    assert rejected.state == S.NEEDS_ATTENTION and rejected.attempts == 2


def test_run_now_for_a_handoff_waiting_in_backoff(world, pending):
    Handoff.objects.filter(pk=pending.pk).update(
        attempts=1,
        next_attempt_at=timezone.now() + timedelta(minutes=10),
        failure_class=FailureClass.TRANSIENT,
        reason_code="http_503",
    )
    page = client_for(world["olga"]).get(f"/handoffs/{pending.pk}/").content.decode()
    assert "Run now" in page and "Waiting to retry after a temporary failure" in page
    response = post(world["olga"], pending, "retry")
    assert b"Sent: delivered" in response.content
    assert HandoffEvent.objects.filter(
        handoff=pending, action="run_now", actor=world["olga"]
    ).exists()


def test_retry_while_uncertain_needs_an_explicit_confirmation_naming_the_risk(world, uncertain):
    response = post(world["olga"], uncertain, "retry")
    assert response.status_code == 200
    body = response.content.decode()
    assert "the receiver may already have the task" in body
    assert "I accept the risk: send again" in body
    uncertain.refresh_from_db()
    assert uncertain.state == S.UNCERTAIN
    assert not HandoffEvent.objects.filter(handoff=uncertain, action="retry").exists()

    confirmed = post(
        world["olga"], uncertain, "retry", {"confirm_risk": "yes", "reason": "checked by phone"}
    )
    assert b"Sent: delivered" in confirmed.content
    uncertain.refresh_from_db()
    assert uncertain.state == S.DELIVERED
    assert ReceiverTask.objects.filter(action_key=uncertain.action_key).count() == 1


def test_reconcile_settles_an_uncertain_handoff_without_sending(world, uncertain):
    response = post(world["olga"], uncertain, "reconcile")
    assert response.status_code == 200
    uncertain.refresh_from_db()
    assert uncertain.state == S.DELIVERED
    assert f"receiver has task {uncertain.destination_id}".encode() in response.content
    assert uncertain.attempt_set.count() == 1
    event = last_event(uncertain)
    assert event.action == "reconcile" and event.actor == world["olga"]


def test_correct_creates_a_new_revision_and_supersedes_the_handoff(world, rejected):
    response = post(
        world["olga"],
        rejected,
        "correct",
        {
            "field_client_name": "Fabrikam",
            "field_plan": "standard",
            "field_contact_email": "",
            "reason": "client name was blank",
        },
    )
    assert response.status_code == 200, response.content
    assert b"revision 2 awaits a new approval" in response.content
    rejected.refresh_from_db()
    assert rejected.state == S.SUPERSEDED
    new = Request.objects.get(workspace_id=7, number=50, revision=2)
    assert new.state == RequestState.AWAITING_APPROVAL
    assert new.payload["client_name"] == "Fabrikam"
    # The e-mail was hidden in the form and left blank: the original value is kept.
    assert new.payload["contact_email"] == "onboarding@northwind.example"
    assert last_event(rejected).action == "correct" and last_event(rejected).actor == world["olga"]
    assert [
        r.number for r in client_for(world["alice"]).get("/approvals/").context["requests"]
    ] == [42, 50]


def test_correct_with_invalid_payload_explains_and_changes_nothing(world, rejected):
    response = post(
        world["olga"], rejected, "correct", {"field_plan": "platinum", "reason": "upgrade"}
    )
    assert response.status_code == 422
    assert b"plan" in response.content
    rejected.refresh_from_db()
    assert rejected.state == S.NEEDS_ATTENTION


def test_cancel_needs_a_reason_and_records_it(world, rejected):
    refused = post(world["olga"], rejected, "cancel", {"reason": " "})
    assert refused.status_code == 422 and b"reason is required" in refused.content
    done = post(world["olga"], rejected, "cancel", {"reason": "client withdrew"})
    assert done.status_code == 200
    rejected.refresh_from_db()
    assert rejected.state == S.CANCELLED
    event = last_event(rejected)
    assert (event.action, event.reason, event.actor) == ("cancel", "client withdrew", world["olga"])


def test_assign_to_an_operator_of_the_workspace(world, rejected):
    response = post(
        world["olga"],
        rejected,
        "assign",
        {"owner": str(world["oscar"].pk), "reason": "my shift ends"},
    )
    assert response.status_code == 200 and b"Assigned to oscar" in response.content
    rejected.refresh_from_db()
    assert rejected.owner == world["oscar"]
    assert (
        last_event(rejected).action == "assign" and last_event(rejected).reason == "my shift ends"
    )


def test_assign_to_someone_outside_the_workspace_is_refused(world, rejected):
    response = post(world["olga"], rejected, "assign", {"owner": str(world["otto"].pk)})
    assert response.status_code == 422
    rejected.refresh_from_db()
    assert rejected.owner == world["olga"]


def test_acknowledge_records_who_and_when(world, rejected):
    response = post(world["olga"], rejected, "acknowledge", {"reason": "looking"})
    assert response.status_code == 200 and b"Acknowledged by olga" in response.content
    rejected.refresh_from_db()
    assert rejected.acknowledged_by == world["olga"] and rejected.acknowledged_at is not None
    assert last_event(rejected).action == "acknowledge"
    again = post(world["olga"], rejected, "retry", {}, htmx=True)
    assert again.status_code == 200


def test_acknowledge_of_a_delivered_handoff_is_a_clear_conflict(world, pending):
    from outbox.dispatch.dispatcher import handoff_deliver

    handoff_deliver(handoff_id=pending.pk)
    response = post(world["olga"], pending, "acknowledge")
    assert response.status_code == 409
    assert b"Not done" in response.content


def test_action_from_the_list_re_renders_the_row(world, rejected):
    response = post(world["olga"], rejected, "acknowledge", {"render": "row"})
    body = response.content.decode()
    assert body.lstrip().startswith(f'<tr id="handoff-{rejected.pk}">')
    assert "Acknowledged by olga" in body


def test_action_without_htmx_redirects_to_the_detail_with_a_message(world, rejected):
    client = client_for(world["olga"])
    response = client.post(f"/handoffs/{rejected.pk}/acknowledge", {})
    assert response.status_code == 302 and response["Location"] == f"/handoffs/{rejected.pk}/"
    assert b"Acknowledged by olga" in client.get(response["Location"]).content


@pytest.mark.parametrize(
    "action", ["retry", "reconcile", "correct", "cancel", "assign", "acknowledge"]
)
def test_member_without_operator_role_gets_403_and_nothing_changes(world, rejected, action):
    before = HandoffEvent.objects.filter(handoff=rejected).count()
    response = post(world["alice"], rejected, action, {"reason": "x", "field_client_name": "Y"})
    assert response.status_code == 403
    assert b"operator role" in response.content
    rejected.refresh_from_db()
    assert rejected.state == S.NEEDS_ATTENTION
    assert HandoffEvent.objects.filter(handoff=rejected).count() == before


@pytest.mark.parametrize(
    "action", ["retry", "reconcile", "correct", "cancel", "assign", "acknowledge"]
)
def test_actions_refuse_get(world, rejected, action):
    assert client_for(world["olga"]).get(f"/handoffs/{rejected.pk}/{action}").status_code == 405


def test_correct_is_refused_when_the_handoff_left_needs_attention_before_the_lock(world, rejected):
    """The state is checked under the row lock: a handoff an operator retried meanwhile is not superseded."""
    from approvals.errors import InvalidRequestState
    from approvals.services import handoff_correct

    Handoff.objects.filter(pk=rejected.pk).update(state=S.PENDING)
    with pytest.raises(InvalidRequestState, match="only a handoff that needs attention"):
        handoff_correct(
            handoff_id=rejected.pk,
            actor=world["olga"],
            edits={"client_name": "Fabrikam"},
            reason="name",
        )
    rejected.refresh_from_db()
    assert rejected.state == S.PENDING
    assert not Request.objects.filter(workspace_id=7, number=50, revision=2).exists()


def test_retry_while_its_destination_is_paused_says_it_is_not_sent_and_why(world, pending):
    """A retry sent at once meets the operator's pause: nothing goes out, and the panel says so with the
    hold's words, never that a worker is sending it."""
    handoff = exhausted(world, pending)
    destination_pause_by_operator(
        name=handoff.destination, actor=world["olga"], reason="receiver upgrade"
    )
    response = post(world["olga"], handoff, "retry", {"reason": "receiver is back"})

    body = response.content.decode()
    handoff.refresh_from_db()
    assert handoff.state == S.PENDING and handoff.attempts == 6
    assert (
        "Queued with the same action key, not sent: its destination is held "
        "(Paused by an operator: receiver upgrade · since "
    ) in body
    assert "a worker is sending it" not in body
    assert not ReceiverTask.objects.filter(action_key=handoff.action_key).exists()
