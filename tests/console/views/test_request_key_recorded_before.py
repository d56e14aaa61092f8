"""Approving a request whose action key was recorded before (its handoff still in the outbox, or moved to the
archive by retention) is a 409 that says so, never a 500: the approval is rolled back with the refused handoff,
the request still awaits a decision and no second handoff exists."""

from datetime import timedelta

import pytest
from django.db.models import F

from approvals.models import Approval, Request, RequestState
from approvals.services import request_approve
from outbox.models import ArchivedHandoff, Handoff
from outbox.services.retention import handoffs_archive_settled
from tests.builders import deliver
from tests.console.clients import HTMX, client_for

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
KEY = "onboarding:7:42:1"


def _kept(handoff: Handoff) -> None:
    """The first handoff stays in the outbox."""


def _archived(handoff: Handoff) -> None:
    Handoff.objects.filter(pk=handoff.pk).update(updated_at=F("updated_at") - timedelta(days=400))
    handoffs_archive_settled(older_than_days=30)
    assert ArchivedHandoff.objects.filter(action_key=KEY).exists()


@pytest.mark.parametrize("where", [_kept, _archived], ids=["in the outbox", "archived"])
@pytest.mark.parametrize("htmx", [True, False], ids=["htmx", "form"])
def test_approving_a_key_recorded_before_is_a_409_with_its_reason_and_writes_nothing(
    world, where, htmx
):
    req = world["request"]
    first = request_approve(
        workspace_id=7, number=42, revision=1, actor=world["alice"], payload_hash=req.payload_hash
    )
    where(deliver(first))
    # The source forgot the decision (a restore from backup, a manual edit): the request waits again.
    Approval.objects.all().delete()
    Request.objects.filter(pk=req.pk).update(state=RequestState.AWAITING_APPROVAL)
    handoffs = Handoff.objects.count() + ArchivedHandoff.objects.count()

    client = client_for(world["alice"])
    response = client.post(
        "/approvals/7/42/1/decide",
        {"decision": "approve", "payload_hash": req.payload_hash},
        **(HTMX if htmx else {}),
    )

    if htmx:
        assert response.status_code == 409
        body = response.content.decode()
    else:
        assert response.status_code == 302
        body = client.get(response["Location"]).content.decode()
    assert "Not decided" in body and KEY in body and "recorded before" in body
    assert Approval.objects.count() == 0
    assert Request.objects.get(pk=req.pk).state == RequestState.AWAITING_APPROVAL
    assert Handoff.objects.count() + ArchivedHandoff.objects.count() == handoffs
