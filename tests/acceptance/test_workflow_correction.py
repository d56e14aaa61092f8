"""Correcting a handoff of a three-step workflow. A correction is a new request revision, whose approval runs
the workflow again from its first step under new keys: for a later step, whose predecessors were delivered,
that would create the client and its account twice at the receiver (as it once did). Such a step is not
corrected: the console offers and recommends compensating the workflow. The first step is corrected, and a
field the rules name but the payload lacks (the usual reason the receiver refuses) can be added."""

import pytest

from approvals.errors import InvalidRequestState
from approvals.models import Request
from approvals.selectors import correction_fields
from approvals.services import handoff_correct, request_approve
from delivery.models import ReceiverTask
from outbox.destinations import InProcessDestination
from outbox.dispatch.dispatcher import drain
from outbox.guidance import available_actions, next_step
from outbox.models import FailureClass, Handoff, HandoffState
from tests.console.clients import client_for
from tests.factories import ONBOARDING_PAYLOAD, make_request, three_step_onboarding_world

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
S = HandoffState
# No contact e-mail: the receiver refuses step 3, the welcome pack.
PAYLOAD = {key: value for key, value in ONBOARDING_PAYLOAD.items() if key != "contact_email"}


@pytest.fixture
def world():
    return three_step_onboarding_world()


@pytest.fixture
def failed_last_step(world) -> Handoff:
    request = make_request(world["w7"], 43, world["bob"], payload=PAYLOAD)
    request_approve(
        workspace_id=7,
        number=43,
        revision=1,
        actor=world["alice"],
        payload_hash=request.payload_hash,
    )
    drain(destination=InProcessDestination())
    step = Handoff.objects.get(action_key="onboarding:7:43:1:send_welcome_pack")
    assert (step.state, step.failure_class) == (S.NEEDS_ATTENTION, FailureClass.PERMANENT)
    return step


def test_a_later_step_is_not_corrected_and_nothing_is_written(world, failed_last_step):
    tasks = ReceiverTask.objects.count()
    with pytest.raises(InvalidRequestState, match="Compensate the workflow"):
        handoff_correct(
            handoff_id=failed_last_step.pk,
            actor=world["olga"],
            reason="add the e-mail",
            edits={"contact_email": "ops@northwind.example"},
        )
    assert Handoff.objects.get(pk=failed_last_step.pk).state == S.NEEDS_ATTENTION
    assert not Request.objects.filter(workspace_id=7, number=43, revision=2).exists()
    drain(destination=InProcessDestination())
    assert ReceiverTask.objects.count() == tasks, "nothing was delivered twice"


def test_the_console_recommends_compensating_a_later_step_not_correcting_it(
    world, failed_last_step
):
    assert "correct" not in available_actions(failed_last_step)
    guidance = next_step(failed_last_step)
    assert guidance.recommended == "compensate" and "do them twice" in guidance.detail
    page = client_for(world["olga"]).get(f"/handoffs/{failed_last_step.pk}/").content.decode()
    assert '<details id="compensate" open>' in page
    assert 'id="correct"' not in page
    refused = client_for(world["olga"]).post(
        f"/handoffs/{failed_last_step.pk}/correct",
        {"field_contact_email": "ops@northwind.example", "reason": "fix"},
        HTTP_HX_REQUEST="true",
    )
    assert refused.status_code in (409, 422)
    assert Handoff.objects.get(pk=failed_last_step.pk).state == S.NEEDS_ATTENTION


def test_the_first_step_is_corrected_with_a_missing_field_added_and_no_operation_copied(world):
    request = make_request(world["w7"], 44, world["bob"], payload={**PAYLOAD, "client_name": "   "})
    request_approve(
        workspace_id=7,
        number=44,
        revision=1,
        actor=world["alice"],
        payload_hash=request.payload_hash,
    )
    drain(destination=InProcessDestination())
    first = Handoff.objects.get(action_key="onboarding:7:44:1:create_client")
    assert first.state == S.NEEDS_ATTENTION
    offered = {f["name"]: f for f in correction_fields(first)}
    assert "operation" not in offered
    assert offered["contact_email"]["missing"] and offered["contact_email"]["value"] == ""
    revision = handoff_correct(
        handoff_id=first.pk,
        actor=world["olga"],
        reason="name and e-mail",
        edits={"client_name": "Northwind", "contact_email": "ops@northwind.example", "notes": ""},
    )
    assert revision.payload == {
        **PAYLOAD,
        "client_name": "Northwind",
        "contact_email": "ops@northwind.example",
    }
