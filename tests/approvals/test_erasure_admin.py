"""Erasure from the admin (issue 39, "Erase on request"): support staff holding the erase permission get an
action on a request that asks first (a confirmation page; nothing erased by opening it) and then erases its
subject through the command's service; support staff without the permission are not offered it and are
refused. And the status events a destination sent about an erased handoff lose the subject too. Both
backends."""

import pytest
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.auth.models import Permission
from django.test import Client

from approvals.models import Request
from approvals.services import support_staff_enroll
from outbox.clock import db_time
from outbox.destinations import InProcessDestination
from outbox.dispatch.dispatcher import handoff_deliver
from outbox.models import ERASED, Erasure, Handoff, StatusEvent, StatusEventResult
from tests.builders import approve
from tests.factories import ONBOARDING_PAYLOAD, make_user

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
EMAIL = ONBOARDING_PAYLOAD["contact_email"]
CHANGELIST = "/admin/approvals/request/"


def _support(name: str, *, may_erase: bool) -> Client:
    user = make_user(name)
    support_staff_enroll(user=user)
    if may_erase:
        user.user_permissions.add(Permission.objects.get(codename="erase_personal_data"))
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def delivered(world) -> Handoff:
    """Request 42 approved and delivered; the receiver's status event names the task by the contact's
    e-mail, as a CRM whose contact id is the e-mail does."""
    handoff = approve(world)
    handoff_deliver(handoff_id=handoff.pk, destination=InProcessDestination())
    StatusEvent.objects.create(
        destination=handoff.destination,
        webhook_id="msg_1",
        kind="task.status_changed",
        action_key=handoff.action_key,
        task_id=f"contact:{EMAIL}",
        status="done",
        sequence=1,
        occurred_at=db_time(),
        result=StatusEventResult.APPLIED,
        handoff=handoff,
    )
    return handoff


def _erase(client: Client, request: Request, **form) -> str:
    response = client.post(
        CHANGELIST,
        {"action": "erase_subject_action", ACTION_CHECKBOX_NAME: [request.pk], **form},
        follow=True,
    )
    return response.content.decode()


def test_support_staff_with_the_permission_confirm_then_the_subject_is_erased(world, delivered):
    client = _support("sam", may_erase=True)
    request = Request.objects.get(workspace_id=7, number=42)
    assert "erase_subject_action" in client.get(CHANGELIST).content.decode()

    page = _erase(client, request)
    assert "Erase a data subject" in page and f'value="{EMAIL}"' in page
    assert not Erasure.objects.exists()  # asked, nothing erased yet

    page = _erase(client, request, email=EMAIL, confirm="Erase")
    assert "Not erased: reason: required" in page and not Erasure.objects.exists()

    page = _erase(client, request, email=EMAIL, reason="ticket 4711", confirm="Erase")
    assert "Erased: workspace 7:" in page
    [erasure] = Erasure.objects.all()
    assert erasure.reason == "ticket 4711" and erasure.erased_by.username == "sam"
    assert Request.objects.get(pk=request.pk).payload["contact_email"] == ERASED
    assert Handoff.objects.get(pk=delivered.pk).payload["contact_email"] == ERASED


def test_support_staff_without_the_permission_are_neither_offered_nor_allowed(world, delivered):
    client = _support("sid", may_erase=False)
    request = Request.objects.get(workspace_id=7, number=42)
    assert "erase_subject_action" not in client.get(CHANGELIST).content.decode()
    _erase(client, request, email=EMAIL, reason="ticket", confirm="Erase")
    assert not Erasure.objects.exists()
    assert Request.objects.get(pk=request.pk).payload["contact_email"] == EMAIL


def test_status_events_about_an_erased_handoff_lose_the_subject(world, delivered):
    client = _support("sam", may_erase=True)
    request = Request.objects.get(workspace_id=7, number=42)
    _erase(client, request, email=EMAIL, reason="ticket 4711", confirm="Erase")
    event = StatusEvent.objects.get(webhook_id="msg_1")
    assert EMAIL not in event.task_id and event.task_id == f"contact:{ERASED}"
    assert (event.action_key, event.status) == (delivered.action_key, "done")
    assert Erasure.objects.get().counts["status_events"] == 1
