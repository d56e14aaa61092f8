"""approvals/services.py: every write of the source application and the domain error each refusal raises."""

import pytest
from django.contrib.auth.models import Group, Permission

from approvals import services
from approvals.errors import (
    ApprovalDenied,
    InvalidPayload,
    InvalidRequestState,
    RequestNotFound,
    RoleChangeRefused,
    StaleRevision,
    WorkspaceNotFound,
)
from approvals.models import (
    Approval,
    Decision,
    Membership,
    Mode,
    Request,
    RequestState,
    Role,
    RoleChange,
    RuleVersion,
    WorkflowMode,
    WorkflowModeChange,
)
from approvals.rules import ONBOARDING_V1
from outbox.models import Handoff, HandoffEvent, HandoffState
from outbox.payloads import payload_hash
from tests.factories import ONBOARDING_PAYLOAD, UserFactory, make_request, make_user

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])

R = RequestState
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


# --- revision_create, request_submit -----------------------------------------------------------


def test_revision_create_moves_the_revision_to_awaiting_approval_with_each_move_in_its_history(
    world,
):
    request = services.revision_create(
        workflow="onboarding",
        workspace_id=7,
        number=60,
        revision=1,
        payload=dict(ONBOARDING_PAYLOAD),
        requested_by=world["bob"],
        actor=world["bob"],
        reason="submitted",
    )
    assert request.state == R.AWAITING_APPROVAL
    assert request.payload_hash == payload_hash(ONBOARDING_PAYLOAD)
    assert states(request) == [
        ("", R.RECEIVED),
        (R.RECEIVED, R.VALIDATED),
        (R.VALIDATED, R.AWAITING_APPROVAL),
    ]
    assert "onboarding-v1" in request.events.get(to_state=R.VALIDATED).reason


def test_request_submit_numbers_the_next_request_of_the_workspace(world):
    request = services.request_submit(
        workspace_id=7, payload=dict(ONBOARDING_PAYLOAD), requested_by=world["bob"]
    )
    assert (request.number, request.revision, request.state) == (43, 1, R.AWAITING_APPROVAL)
    assert request.requested_by == world["bob"]


def test_request_submit_with_a_taken_number_is_refused(world):
    with pytest.raises(InvalidRequestState):
        services.request_submit(
            workspace_id=7, payload=dict(ONBOARDING_PAYLOAD), requested_by=world["bob"], number=42
        )


def test_request_submit_by_someone_who_is_not_a_requester_there_is_denied(world):
    with pytest.raises(ApprovalDenied):
        services.request_submit(
            workspace_id=7, payload=dict(ONBOARDING_PAYLOAD), requested_by=world["alice"]
        )
    with pytest.raises(ApprovalDenied):
        services.request_submit(
            workspace_id=8, payload=dict(ONBOARDING_PAYLOAD), requested_by=world["bob"]
        )
    assert Request.objects.count() == 1


def test_request_submit_to_an_unknown_workspace_is_refused(world):
    with pytest.raises(WorkspaceNotFound):
        services.request_submit(
            workspace_id=99, payload=dict(ONBOARDING_PAYLOAD), requested_by=world["bob"]
        )


def test_request_submit_with_a_payload_that_breaks_the_rules_names_every_problem(world):
    with pytest.raises(InvalidPayload) as raised:
        services.request_submit(
            workspace_id=7, payload={"client_name": "X", "plan": "gold"}, requested_by=world["bob"]
        )
    assert len(raised.value.reasons) == 2
    assert Request.objects.count() == 1


# --- request_approve ---------------------------------------------------------------------------


def test_approval_records_decision_request_state_and_one_pending_handoff_together(world):
    handoff = approve(world, reason="looks right")
    request = Request.objects.get(pk=world["request"].pk)
    assert request.state == R.APPROVED
    approval = Approval.objects.get(request=request)
    assert (approval.decision, approval.decided_by, approval.rule_version) == (
        Decision.APPROVE,
        world["alice"],
        "onboarding-v1",
    )
    assert approval.payload_hash == request.payload_hash
    assert handoff.action_key == "onboarding:7:42:1"
    assert (handoff.state, handoff.payload, handoff.source_id) == (
        HandoffState.PENDING,
        request.payload,
        request.pk,
    )
    assert handoff.rule_version == "onboarding-v1"
    assert handoff.source_ref == "request 42 revision 1"
    assert HandoffEvent.objects.get(handoff=handoff).actor == world["alice"]


def test_approved_handoff_is_owned_by_the_workspace_on_call_operator(world):
    assert approve(world).owner == world["olga"]


def test_without_on_call_the_first_operator_of_the_workspace_owns_the_handoff(world):
    world["w7"].on_call = None
    world["w7"].save()
    assert approve(world).owner == world["olga"]


def test_approval_in_observe_mode_records_an_observed_handoff(world):
    WorkflowMode.objects.create(workflow="onboarding", mode=Mode.OBSERVE)
    handoff = approve(world)
    assert handoff.state == HandoffState.OBSERVED
    assert handoff.next_attempt_at is None


def test_a_requester_cannot_approve_their_own_request(world):
    request = make_request(world["w7"], 43, world["rita"])
    with pytest.raises(ApprovalDenied, match="own request"):
        services.request_approve(
            workspace_id=7,
            number=43,
            revision=1,
            actor=world["rita"],
            payload_hash=request.payload_hash,
        )
    assert Request.objects.get(pk=request.pk).state == R.AWAITING_APPROVAL
    assert not Handoff.objects.exists()


@pytest.mark.parametrize("actor", ["bob", "olga", "mallory"])
def test_only_an_approver_of_the_request_workspace_may_approve(world, actor):
    # bob requests and olga operates in workspace 7; mallory approves, but in workspace 8.
    with pytest.raises(ApprovalDenied):
        approve(world, actor=actor)
    assert not Approval.objects.exists()
    assert not Handoff.objects.exists()


def test_approval_with_a_payload_hash_not_shown_for_this_revision_is_stale(world):
    with pytest.raises(StaleRevision):
        approve(world, hash_=payload_hash({**ONBOARDING_PAYLOAD, "plan": "enterprise"}))
    assert Request.objects.get(pk=world["request"].pk).state == R.AWAITING_APPROVAL


def test_approval_of_a_revision_that_does_not_exist_is_stale(world):
    with pytest.raises(StaleRevision):
        approve(world, revision=2)


def test_approval_of_a_request_that_does_not_exist_is_not_found(world):
    with pytest.raises(RequestNotFound):
        approve(world, number=4242)


def test_approval_of_a_replaced_revision_is_stale(world):
    services.request_revise(
        workspace_id=7,
        number=42,
        payload={**ONBOARDING_PAYLOAD, "plan": "enterprise"},
        actor=world["bob"],
    )
    with pytest.raises(StaleRevision, match="replaced by revision 2"):
        approve(world)


def test_a_revision_is_decided_once(world):
    approve(world)
    with pytest.raises(InvalidRequestState):
        approve(world)
    assert Handoff.objects.count() == 1
    assert Approval.objects.count() == 1


def test_approval_under_rules_published_since_validation_is_refused(world):
    services.rule_version_publish(workflow="onboarding", schema=ENTERPRISE_ONLY, actor=publisher())
    with pytest.raises(InvalidPayload, match="under rules onboarding-v2"):
        approve(world)
    assert not Handoff.objects.exists()


def test_approval_stores_the_rule_version_in_force(world):
    services.rule_version_publish(
        workflow="onboarding", schema=ONBOARDING_V1.schema, actor=publisher()
    )
    handoff = approve(world)
    assert handoff.rule_version == "onboarding-v2"
    assert Approval.objects.get().rule_version == "onboarding-v2"


# --- request_reject ----------------------------------------------------------------------------


def test_rejection_records_the_decision_and_its_reason_and_no_handoff(world):
    request = reject(world, reason="duplicate client")
    assert request.state == R.REJECTED
    approval = Approval.objects.get(request=request)
    assert (approval.decision, approval.reason) == (Decision.REJECT, "duplicate client")
    assert request.events.get(to_state=R.REJECTED).reason == "duplicate client"
    assert not Handoff.objects.exists()


def test_rejection_without_a_reason_is_refused(world):
    with pytest.raises(InvalidPayload):
        reject(world, reason="   ")
    assert Request.objects.get(pk=world["request"].pk).state == R.AWAITING_APPROVAL


def test_rejection_follows_the_approval_rules_on_who_decides(world):
    with pytest.raises(ApprovalDenied):
        reject(world, actor="bob")
    with pytest.raises(ApprovalDenied):
        reject(world, actor="mallory")


def test_rejection_is_allowed_under_rules_the_payload_no_longer_passes(world):
    services.rule_version_publish(workflow="onboarding", schema=ENTERPRISE_ONLY, actor=publisher())
    assert reject(world).state == R.REJECTED


# --- revision_add_locked, request_revise -------------------------------------------------------


def test_revising_an_undecided_request_supersedes_it(world):
    new = services.request_revise(
        workspace_id=7,
        number=42,
        payload={**ONBOARDING_PAYLOAD, "plan": "starter"},
        actor=world["bob"],
        reason="plan changed",
    )
    assert (new.revision, new.state, new.payload["plan"]) == (2, R.AWAITING_APPROVAL, "starter")
    assert new.requested_by == world["bob"]
    assert Request.objects.get(pk=world["request"].pk).state == R.SUPERSEDED


def test_revising_a_decided_request_leaves_the_decided_revision_and_its_handoff_as_they_were(world):
    handoff = approve(world)
    new = services.request_revise(
        workspace_id=7,
        number=42,
        payload={**ONBOARDING_PAYLOAD, "plan": "starter"},
        actor=world["bob"],
    )
    assert new.revision == 2
    assert new.action_key == "onboarding:7:42:2"
    assert Request.objects.get(pk=world["request"].pk).state == R.APPROVED
    assert Handoff.objects.get(pk=handoff.pk).state == HandoffState.PENDING


def test_revision_add_locked_numbers_the_revision_after_the_current_one(world):
    new = services.revision_add_locked(
        world["request"], payload=dict(ONBOARDING_PAYLOAD), actor=world["bob"]
    )
    assert new.revision == 2
    assert new.events.filter(reason="revision 2").exists()


def test_revising_an_unknown_request_is_not_found(world):
    with pytest.raises(RequestNotFound):
        services.request_revise(
            workspace_id=7, number=4242, payload=dict(ONBOARDING_PAYLOAD), actor=world["bob"]
        )


def test_a_revision_with_an_invalid_payload_is_refused_and_the_current_one_stays(world):
    with pytest.raises(InvalidPayload):
        services.request_revise(
            workspace_id=7, number=42, payload={"plan": "gold"}, actor=world["bob"]
        )
    assert Request.objects.get().state == R.AWAITING_APPROVAL


# --- handoff_correct ---------------------------------------------------------------------------


def needing_attention(world) -> Handoff:
    handoff = approve(world)
    Handoff.objects.filter(pk=handoff.pk).update(
        state=HandoffState.NEEDS_ATTENTION, failure_class="permanent", reason_code="payload_invalid"
    )
    return handoff


def test_correction_supersedes_handoff_and_revision_and_opens_a_new_revision_for_approval(world):
    handoff = needing_attention(world)
    corrected = {**ONBOARDING_PAYLOAD, "client_name": "Northwind Traders Ltd"}
    new = services.handoff_correct(
        handoff_id=handoff.pk, actor=world["olga"], edits=corrected, reason="legal name"
    )
    assert (new.revision, new.state, new.payload) == (2, R.AWAITING_APPROVAL, corrected)
    assert Handoff.objects.get(pk=handoff.pk).state == HandoffState.SUPERSEDED
    assert Request.objects.get(pk=world["request"].pk).state == R.SUPERSEDED
    assert HandoffEvent.objects.filter(
        handoff=handoff, to_state=HandoffState.SUPERSEDED, reason="corrected: legal name"
    ).exists()
    assert Handoff.objects.count() == 1, "the new revision gets its handoff only when approved"


def test_correction_by_someone_who_does_not_operate_the_workspace_is_denied(world):
    handoff = needing_attention(world)
    for actor in ("alice", "mallory"):
        with pytest.raises(ApprovalDenied):
            services.handoff_correct(
                handoff_id=handoff.pk,
                actor=world[actor],
                edits=dict(ONBOARDING_PAYLOAD),
                reason="fix",
            )
    assert Handoff.objects.get(pk=handoff.pk).state == HandoffState.NEEDS_ATTENTION


def test_only_a_handoff_that_needs_attention_can_be_corrected(world):
    handoff = approve(world)
    with pytest.raises(InvalidRequestState):
        services.handoff_correct(
            handoff_id=handoff.pk, actor=world["olga"], edits=dict(ONBOARDING_PAYLOAD), reason="fix"
        )
    assert Handoff.objects.get(pk=handoff.pk).state == HandoffState.PENDING


def test_correction_needs_a_reason_and_a_payload_that_passes_the_rules(world):
    handoff = needing_attention(world)
    with pytest.raises(InvalidPayload):
        services.handoff_correct(
            handoff_id=handoff.pk, actor=world["olga"], edits=dict(ONBOARDING_PAYLOAD), reason=" "
        )
    with pytest.raises(InvalidPayload):
        services.handoff_correct(
            handoff_id=handoff.pk, actor=world["olga"], edits={"plan": "gold"}, reason="fix"
        )
    assert Handoff.objects.get(pk=handoff.pk).state == HandoffState.NEEDS_ATTENTION
    assert Request.objects.count() == 1


def test_correcting_an_unknown_handoff_is_not_found(world):
    with pytest.raises(RequestNotFound):
        services.handoff_correct(
            handoff_id=987654, actor=world["olga"], edits=dict(ONBOARDING_PAYLOAD), reason="fix"
        )


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


# --- workflow_mode_set -------------------------------------------------------------------------


def test_first_mode_change_is_audited_from_the_default_mode(world, settings):
    actor = mode_admin()
    mode = services.workflow_mode_set(
        workflow="onboarding",
        mode=Mode.LIMITED,
        actor=actor,
        reason="pilot",
        allowed_workspace_ids=[8, 7, 7],
    )
    assert (mode.mode, mode.updated_by) == (Mode.LIMITED, actor)
    assert sorted(mode.allowed_workspaces.values_list("id", flat=True)) == [7, 8]
    change = WorkflowModeChange.objects.get()
    assert (change.from_mode, change.to_mode, change.from_allowed, change.to_allowed) == (
        settings.WORKFLOW_DEFAULT_MODE,
        Mode.LIMITED,
        [],
        [7, 8],
    )
    assert (change.changed_by, change.reason) == (actor, "pilot")


def test_mode_change_without_a_list_keeps_the_allowed_workspaces(world):
    actor = mode_admin()
    services.workflow_mode_set(
        workflow="onboarding",
        mode=Mode.LIMITED,
        actor=actor,
        reason="pilot",
        allowed_workspace_ids=[7],
    )
    mode = services.workflow_mode_set(
        workflow="onboarding", mode=Mode.LIVE, actor=actor, reason="go live"
    )
    assert list(mode.allowed_workspaces.values_list("id", flat=True)) == [7]
    last = WorkflowModeChange.objects.order_by("-id").first()
    assert (last.from_mode, last.to_mode, last.from_allowed, last.to_allowed) == (
        Mode.LIMITED,
        Mode.LIVE,
        [7],
        [7],
    )
    assert WorkflowMode.objects.count() == 1


@pytest.mark.parametrize(
    ("mode", "reason", "error"),
    [
        ("sometimes", "why", InvalidPayload),
        (Mode.LIVE, "  ", InvalidPayload),
    ],
)
def test_mode_change_with_unknown_mode_or_no_reason_is_refused(world, mode, reason, error):
    with pytest.raises(error):
        services.workflow_mode_set(
            workflow="onboarding", mode=mode, actor=mode_admin(), reason=reason
        )
    assert not WorkflowModeChange.objects.exists()


def test_mode_change_without_the_permission_is_denied(world):
    with pytest.raises(ApprovalDenied):
        services.workflow_mode_set(
            workflow="onboarding", mode=Mode.OBSERVE, actor=world["olga"], reason="why"
        )
    assert not WorkflowMode.objects.exists()


def test_mode_change_allowing_an_unknown_workspace_is_refused_and_changes_nothing(world):
    with pytest.raises(WorkspaceNotFound, match="99"):
        services.workflow_mode_set(
            workflow="onboarding",
            mode=Mode.LIMITED,
            actor=mode_admin(),
            reason="pilot",
            allowed_workspace_ids=[7, 99],
        )
    assert not WorkflowMode.objects.exists()
    assert not WorkflowModeChange.objects.exists()


# --- membership_grant, membership_revoke -------------------------------------------------------


def test_granting_a_role_adds_the_membership_and_its_audit_row(world):
    actor, carol = role_admin(), make_user("carol")
    membership = services.membership_grant(
        workspace_id=7, user=carol, role=Role.APPROVER, actor=actor, reason="covers for alice"
    )
    assert (membership.user, membership.workspace_id, membership.role) == (carol, 7, Role.APPROVER)
    change = RoleChange.objects.get()
    assert (
        change.workspace_id,
        change.user,
        change.role,
        change.action,
        change.changed_by,
        change.reason,
    ) == (7, carol, Role.APPROVER, RoleChange.Action.GRANT, actor, "covers for alice")


def test_granting_a_role_already_held_is_refused_without_an_audit_row(world):
    with pytest.raises(RoleChangeRefused):
        services.membership_grant(
            workspace_id=7,
            user=world["alice"],
            role=Role.APPROVER,
            actor=role_admin(),
            reason="again",
        )
    assert not RoleChange.objects.exists()


def test_revoking_a_role_removes_the_membership_and_writes_its_audit_row(world):
    actor = role_admin()
    services.membership_revoke(
        workspace_id=7, user=world["alice"], role=Role.APPROVER, actor=actor, reason="left"
    )
    assert not Membership.objects.filter(user=world["alice"], workspace_id=7).exists()
    change = RoleChange.objects.get()
    assert (change.user, change.role, change.action, change.changed_by, change.reason) == (
        world["alice"],
        Role.APPROVER,
        RoleChange.Action.REVOKE,
        actor,
        "left",
    )


def test_a_revoked_approver_can_no_longer_approve(world):
    services.membership_revoke(
        workspace_id=7, user=world["alice"], role=Role.APPROVER, actor=role_admin(), reason="left"
    )
    with pytest.raises(ApprovalDenied):
        approve(world)


def test_revoking_a_role_not_held_is_refused_without_an_audit_row(world):
    with pytest.raises(RoleChangeRefused):
        services.membership_revoke(
            workspace_id=8,
            user=world["alice"],
            role=Role.APPROVER,
            actor=role_admin(),
            reason="never had it",
        )
    assert not RoleChange.objects.exists()


@pytest.mark.parametrize("change", [services.membership_grant, services.membership_revoke])
@pytest.mark.parametrize(
    ("workspace_id", "role", "reason", "error"),
    [
        (7, "owner", "why", InvalidPayload),
        (7, Role.OPERATOR, " ", InvalidPayload),
        (99, Role.OPERATOR, "why", WorkspaceNotFound),
    ],
)
def test_role_change_with_unknown_role_no_reason_or_unknown_workspace_is_refused(
    world, change, workspace_id, role, reason, error
):
    with pytest.raises(error):
        change(
            workspace_id=workspace_id,
            user=world["olga"],
            role=role,
            actor=role_admin(),
            reason=reason,
        )
    assert Membership.objects.filter(user=world["olga"]).count() == 1
    assert not RoleChange.objects.exists()


@pytest.mark.parametrize("change", [services.membership_grant, services.membership_revoke])
def test_role_change_without_the_permission_is_denied(world, change):
    # An operator of the workspace is not thereby allowed to change its roles.
    with pytest.raises(ApprovalDenied):
        change(
            workspace_id=7,
            user=world["olga"],
            role=Role.OPERATOR,
            actor=world["olga"],
            reason="why",
        )
    assert Membership.objects.filter(user=world["olga"]).count() == 1
    assert not RoleChange.objects.exists()


# --- support_group_sync, support_staff_enroll --------------------------------------------------


def support_permissions(group: Group) -> set[str]:
    return {
        f"{p.content_type.app_label}.{p.codename}"
        for p in group.permissions.select_related("content_type")
    }


def test_support_group_holds_view_permissions_plus_reconcile_and_assign_only(db):
    granted = support_permissions(services.support_group_sync())
    assert {
        "outbox.reconcile_handoff",
        "outbox.assign_handoff",
        "outbox.view_handoff",
        "approvals.view_membership",
        "delivery.view_receivertask",
    } <= granted
    assert {p.split(".")[1].split("_")[0] for p in granted} == {"view", "reconcile", "assign"}


def test_support_group_sync_removes_extra_permissions_and_can_run_again(db):
    group = services.support_group_sync()
    before = support_permissions(group)
    group.permissions.add(Permission.objects.get(codename="delete_handoff"))
    assert support_permissions(services.support_group_sync()) == before
    assert Group.objects.filter(name=services.SUPPORT_GROUP).count() == 1


def test_enrolled_support_staff_is_staff_in_the_support_group_and_never_superuser(db):
    user = make_user("sam", is_superuser=True)
    services.support_staff_enroll(user=user)
    user.refresh_from_db()
    assert (user.is_staff, user.is_superuser) == (True, False)
    assert list(user.groups.values_list("name", flat=True)) == [services.SUPPORT_GROUP]
