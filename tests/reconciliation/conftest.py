"""Builders for reconciliation tests: real handoffs, really delivered through the in-process destination."""

import pytest

from outbox.destinations import InProcessDestination
from outbox.dispatcher import handoff_deliver
from outbox.models import Handoff
from outbox.services import handoff_record
from tests.factories import ONBOARDING_PAYLOAD, onboarding_world


def record(number: int, *, workspace_id: int = 7, payload: dict | None = None, owner=None,
           rule_version: str = "onboarding-v1") -> Handoff:
    return handoff_record(
        workflow="onboarding", workspace_id=workspace_id, source_ref=f"request {number} revision 1",
        source_id=number, action_key=f"onboarding:{workspace_id}:{number}:1",
        payload=dict(ONBOARDING_PAYLOAD if payload is None else payload), rule_version=rule_version, owner=owner,
    )


def deliver(handoff: Handoff) -> Handoff:
    state = handoff_deliver(handoff_id=handoff.pk, destination=InProcessDestination())
    assert state == "delivered"
    return Handoff.objects.get(pk=handoff.pk)


@pytest.fixture
def world():
    return onboarding_world()
