"""approvals/services/rule_versions.py: publishing rules."""

import pytest

from approvals import services
from approvals.errors import (
    ApprovalDenied,
    InvalidPayload,
)
from approvals.models import (
    RequestState,
    RuleVersion,
)
from approvals.rules import ONBOARDING_V1
from tests.approvals.services.calls import (
    ENTERPRISE_ONLY,
    publisher,
    stored_versions,
)

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])

R = RequestState


# --- rule_version_publish ----------------------------------------------------------------------


def test_publishing_adds_the_next_version_after_the_built_in_rules(world):
    actor = publisher()
    stored = services.rule_version_publish(
        workflow="onboarding", schema=ENTERPRISE_ONLY, actor=actor, notes="enterprise only"
    )
    assert (stored.number, stored.version, stored.created_by, stored.notes) == (
        2,
        "onboarding-v2",
        actor,
        "enterprise only",
    )
    assert RuleVersion.objects.get(number=1).version == ONBOARDING_V1.version
    again = services.rule_version_publish(
        workflow="onboarding", schema=ONBOARDING_V1.schema, actor=actor
    )
    assert again.version == "onboarding-v3"


def test_rules_of_a_new_workflow_start_at_version_1(world):
    stored = services.rule_version_publish(
        workflow="offboarding", schema={"type": "object"}, actor=publisher()
    )
    assert (stored.number, stored.version) == (1, "offboarding-v1")


def test_publishing_rules_without_the_permission_is_denied(world):
    before = stored_versions()
    with pytest.raises(ApprovalDenied):
        services.rule_version_publish(
            workflow="onboarding", schema=ENTERPRISE_ONLY, actor=world["alice"]
        )
    assert stored_versions() == before


@pytest.mark.parametrize(
    "schema",
    [["not", "an", "object"], {"type": "no-such-type"}, {"type": "string", "pattern": "(a)\\1"}],
)
def test_rules_that_are_not_a_usable_schema_are_refused(world, schema):
    before = stored_versions()
    with pytest.raises(InvalidPayload):
        services.rule_version_publish(workflow="onboarding", schema=schema, actor=publisher())
    assert stored_versions() == before
