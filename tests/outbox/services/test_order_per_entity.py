"""Order per business entity (issue 39): a step whose route declares "order_by" takes the payload's value as
its ordering key; its destination is sent the open steps of one key in approval order (a retried first one
keeps its place), while other keys are not held up, and the check names a key that is no field. Both
backends."""

import pytest

from approvals.services.rule_versions import rule_version_problems, rule_version_publish
from outbox.clock import db_now
from outbox.dispatch.claims import handoff_claim_due
from outbox.models import Handoff, HandoffState
from tests.builders import approve
from tests.factories import ONBOARDING_PAYLOAD, onboarding_world
from tests.factories import ONBOARDING_THREE_STEPS_SCHEMA as BASE

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
S = HandoffState
SCHEMA = {**BASE, "properties": {**BASE["properties"], "client_id": {"type": "string"}}}
ORDERED = [{"name": "create_client", "order_by": {"field": "client_id"}}]


def _approve(world, number: int, client: str) -> Handoff:
    return approve(world, number, payload={**ONBOARDING_PAYLOAD, "client_id": client})


def _claimed() -> dict[int, object]:
    return {claim.handoff_id: claim for claim in handoff_claim_due(worker="w1", limit=50)}


def test_one_key_goes_in_approval_order_a_retried_first_keeps_its_place_others_go_on():
    world = onboarding_world()
    rule_version_publish(workflow="onboarding", schema=SCHEMA, steps=ORDERED, actor=None)
    # Approved in this order; request numbers need not follow it.
    first, second = _approve(world, 61, "acme"), _approve(world, 60, "acme")
    other = _approve(world, 62, "globex")
    assert (first.order_key, second.order_key, other.order_key) == ("acme", "acme", "globex")
    assert first.order_position < second.order_position

    claims = _claimed()
    assert set(claims) == {first.pk, other.pk}
    # The first one's call fails and it waits to be retried: the second still waits behind it.
    Handoff.objects.filter(pk=first.pk).update(
        state=S.PENDING, next_attempt_at=db_now(), lease_owner=""
    )
    Handoff.objects.filter(pk=other.pk).update(state=S.DELIVERED)
    assert set(_claimed()) == {first.pk}
    Handoff.objects.filter(pk=first.pk).update(state=S.DELIVERED)
    assert set(_claimed()) == {second.pk}


def test_an_order_key_must_be_a_field_of_the_schema():
    steps = [{"name": "create_client", "order_by": {"field": "client"}}]
    assert rule_version_problems(schema=SCHEMA, steps=steps) == [
        "steps[0].order_by.field: 'client' is no field of the schema (fields: "
        + ", ".join(sorted(SCHEMA["properties"]))
        + ")"
    ]
    assert rule_version_problems(schema=SCHEMA, steps=[{**steps[0], "order_by": "client_id"}])
    assert rule_version_problems(schema=SCHEMA, steps=ORDERED) == []
