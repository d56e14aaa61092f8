"""Rule versions: publishing rules makes a new version; each decision and handoff keeps the one it used."""

import pytest

from approvals.errors import ApprovalDenied, InvalidPayload
from approvals.models import Approval, RuleVersion
from approvals.rules import ONBOARDING_V1, payload_problems, rules_for
from approvals.services import request_approve, rule_version_publish
from tests.factories import ONBOARDING_PAYLOAD, make_request, make_user
from tests.intake.triggers import trigger_document

pytestmark = pytest.mark.django_db

V2_SCHEMA = {
    **ONBOARDING_V1.schema,
    "required": [*ONBOARDING_V1.schema["required"], "country"],
    "properties": {
        **ONBOARDING_V1.schema["properties"],
        "country": {"type": "string", "minLength": 2},
    },
}


@pytest.fixture
def support(db):
    return make_user("support", is_staff=True, is_superuser=True)


def test_publishing_rules_creates_a_new_version_and_old_decisions_keep_theirs(world, support):
    first = request_approve(
        workspace_id=7,
        number=42,
        revision=1,
        actor=world["alice"],
        payload_hash=world["request"].payload_hash,
    )
    published = rule_version_publish(
        workflow="onboarding", schema=V2_SCHEMA, actor=support, notes="country needed"
    )
    assert (published.number, published.version) == (2, "onboarding-v2")
    assert rules_for("onboarding").version == "onboarding-v2"

    later = make_request(
        world["w7"], 43, world["bob"], payload={**ONBOARDING_PAYLOAD, "country": "NL"}
    )
    second = request_approve(
        workspace_id=7, number=43, revision=1, actor=world["alice"], payload_hash=later.payload_hash
    )
    assert first.rule_version == "onboarding-v1"
    assert second.rule_version == "onboarding-v2"
    assert list(Approval.objects.order_by("id").values_list("rule_version", flat=True)) == [
        "onboarding-v1",
        "onboarding-v2",
    ]
    assert RuleVersion.objects.get(version="onboarding-v1").schema == ONBOARDING_V1.schema


def test_approval_under_new_rules_refuses_a_payload_they_reject(world, support):
    rule_version_publish(workflow="onboarding", schema=V2_SCHEMA, actor=support)
    with pytest.raises(
        InvalidPayload, match="under rules onboarding-v2: payload: 'country' is a required"
    ):
        request_approve(
            workspace_id=7,
            number=42,
            revision=1,
            actor=world["alice"],
            payload_hash=world["request"].payload_hash,
        )
    assert Approval.objects.count() == 0


def test_triggers_are_validated_under_the_rules_in_force(world, support, send):
    rule_version_publish(workflow="onboarding", schema=V2_SCHEMA, actor=support)
    refused = send(trigger_document())
    assert refused.status_code == 422
    assert refused.json()["reasons"] == ["payload: 'country' is a required property"]
    accepted = send(
        trigger_document(reference="crm-2", payload={**ONBOARDING_PAYLOAD, "country": "NL"})
    )
    assert accepted.status_code == 202
    assert payload_problems("onboarding", {**ONBOARDING_PAYLOAD, "country": "NL"}) == []


def test_publishing_needs_permission_and_a_valid_schema(world, support):
    with pytest.raises(ApprovalDenied):
        rule_version_publish(workflow="onboarding", schema=V2_SCHEMA, actor=world["alice"])
    with pytest.raises(InvalidPayload, match="not a valid JSON Schema"):
        rule_version_publish(workflow="onboarding", schema={"type": "nonsense"}, actor=support)
    assert rules_for("onboarding").version == "onboarding-v1"
    assert RuleVersion.objects.filter(number__gt=1).count() == 0
