"""Service calls and users that the tests of several services modules share."""

from approvals import services
from approvals.models import Request, RuleVersion
from approvals.rules import ONBOARDING_V1
from tests.factories import UserFactory

# A schema stricter than the built-in rules: the plan must be enterprise.
ENTERPRISE_ONLY = {
    **ONBOARDING_V1.schema,
    "properties": {
        **ONBOARDING_V1.schema["properties"],
        "plan": {"type": "string", "enum": ["enterprise"]},
    },
}


def approve(world, *, actor="alice", number=42, revision=1, hash_=None, **kwargs):
    request = world["request"]
    return services.request_approve(
        workspace_id=7,
        number=number,
        revision=revision,
        actor=world[actor],
        payload_hash=request.payload_hash if hash_ is None else hash_,
        **kwargs,
    )


def reject(world, *, actor="alice", reason="not eligible", **kwargs):
    return services.request_reject(
        workspace_id=7,
        number=42,
        revision=1,
        actor=world[actor],
        payload_hash=world["request"].payload_hash,
        reason=reason,
        **kwargs,
    )


def states(request: Request) -> list[tuple[str, str]]:
    return list(request.events.order_by("at", "id").values_list("from_state", "to_state"))


def publisher(**extra):
    return UserFactory(permissions=["approvals.add_ruleversion"], **extra)


def stored_versions() -> list[str]:
    # The built-in rules are stored by a data migration, which a flushed (transactional) test database lacks.
    return list(RuleVersion.objects.order_by("id").values_list("version", flat=True))


def role_admin():
    return UserFactory(permissions=["approvals.add_membership", "approvals.delete_membership"])


def mode_admin():
    return UserFactory(permissions=["approvals.change_workflowmode"])
