"""Writes of the source application: requests, revisions, decisions, rule versions and delivery modes.

An approval writes the decision, the request state and the outbox row in one transaction.
"""

from collections.abc import Iterable

from django.apps import apps
from django.conf import settings
from django.contrib.auth.models import Group, Permission
from django.contrib.contenttypes.models import ContentType
from django.db import transaction
from django.db.models import Max

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
    RequestEvent,
    RequestState,
    Role,
    RoleChange,
    RuleVersion,
    WorkflowMode,
    WorkflowModeChange,
    Workspace,
)
from approvals.rules import (
    BUILT_IN_RULES,
    payload_problems,
    publish_problems,
    rules_for,
    steps_of,
    steps_problems,
)
from approvals.selectors import REQUESTER_REVISABLE_STATES, approver_correctable, may_cancel
from outbox import services as outbox_services
from outbox.errors import InvalidTransition
from outbox.limits import SET_LIMITS_PERMISSION
from outbox.models import Handoff, HandoffState
from outbox.payloads import payload_hash
from outbox.selectors import correction_fields
from outbox.steps import base_payload

DB = "default"


def _move(
    request: Request, to_state: str, *, actor=None, reason: str = "", reason_code: str = ""
) -> None:
    if not request.can_move_to(to_state):
        raise InvalidRequestState(f"{request} is {request.state}; it cannot become {to_state}")
    RequestEvent.objects.create(
        request=request,
        from_state=request.state,
        to_state=to_state,
        actor=actor,
        reason=f"[{reason_code}] {reason}" if reason_code else reason,
    )
    request.state = to_state
    request.reason_code = reason_code or request.reason_code
    request.save(update_fields=["state", "reason_code", "updated_at"])


def _validated_payload(workflow: str, payload: object) -> dict:
    problems = payload_problems(workflow, payload)
    if problems:
        raise InvalidPayload(problems)
    return payload


def _require_member(user, workspace_id: int, role: str) -> None:
    if not Membership.objects.filter(user=user, workspace_id=workspace_id, role=role).exists():
        raise ApprovalDenied(f"{user} is not {role} in workspace {workspace_id}")


def revision_create(
    *,
    workflow: str,
    workspace_id: int,
    number: int,
    revision: int,
    payload: dict,
    requested_by,
    actor,
    reason: str,
    corrected_by=None,
) -> Request:
    """A new request revision, moved received -> validated -> awaiting approval, each move in its history.

    The caller has checked the payload against the rules in force; call inside its transaction."""
    request = Request.objects.create(
        workflow=workflow,
        workspace_id=workspace_id,
        number=number,
        revision=revision,
        payload=payload,
        payload_hash=payload_hash(payload),
        state=RequestState.RECEIVED,
        requested_by=requested_by,
        corrected_by=corrected_by,
    )
    RequestEvent.objects.create(
        request=request, from_state="", to_state=request.state, actor=actor, reason=reason
    )
    _move(
        request,
        RequestState.VALIDATED,
        actor=actor,
        reason=f"payload passes rules {rules_for(workflow).version}",
    )
    _move(
        request,
        RequestState.AWAITING_APPROVAL,
        actor=actor,
        reason="awaiting an approver's decision",
    )
    return request


def request_submit(
    *,
    workspace_id: int,
    payload: dict,
    requested_by,
    number: int | None = None,
    workflow: str = "onboarding",
) -> Request:
    """Record a new request (revision 1) awaiting approval."""
    if not Workspace.objects.filter(pk=workspace_id).exists():
        raise WorkspaceNotFound(workspace_id)
    _require_member(requested_by, workspace_id, Role.REQUESTER)
    _validated_payload(workflow, payload)
    with transaction.atomic(using=DB):
        if number is None:
            number = (
                Request.objects.filter(workspace_id=workspace_id, workflow=workflow).aggregate(
                    n=Max("number")
                )["n"]
                or 0
            ) + 1
        elif Request.objects.filter(
            workspace_id=workspace_id, workflow=workflow, number=number
        ).exists():
            raise InvalidRequestState(
                f"request {number} already exists in workspace {workspace_id}"
            )
        request = revision_create(
            workflow=workflow,
            workspace_id=workspace_id,
            number=number,
            revision=1,
            payload=payload,
            requested_by=requested_by,
            actor=requested_by,
            reason="submitted",
        )
    return request


def _locked_revision(*, workspace_id: int, number: int, revision: int, workflow: str) -> Request:
    request = (
        Request.objects.select_for_update(no_key=True)
        .filter(workspace_id=workspace_id, workflow=workflow, number=number, revision=revision)
        .first()
    )
    if request is None:
        if Request.objects.filter(
            workspace_id=workspace_id, workflow=workflow, number=number
        ).exists():
            raise StaleRevision(f"request {number} has no revision {revision}")
        raise RequestNotFound(f"no {workflow} request {number} in workspace {workspace_id}")
    return request


def _require_newest(request: Request) -> None:
    newest = Request.objects.filter(
        workspace_id=request.workspace_id, workflow=request.workflow, number=request.number
    ).aggregate(n=Max("revision"))["n"]
    if newest != request.revision:
        raise StaleRevision(
            f"request {request.number} revision {request.revision} was replaced by revision {newest}"
        )


def _locked_for_review(
    *,
    workspace_id: int,
    number: int,
    revision: int,
    workflow: str,
    actor,
    payload_hash: str,
    as_decider: bool,
) -> Request:
    """The revision an approver acts on (decides, or corrects), locked: the newest, awaiting approval, exactly
    as shown to them, and not their own request (nor, to decide it, one they corrected)."""
    request = _locked_revision(
        workspace_id=workspace_id, number=number, revision=revision, workflow=workflow
    )
    _require_member(actor, request.workspace_id, Role.APPROVER)
    if request.requested_by_id == actor.pk:
        raise ApprovalDenied(
            "a requester cannot decide their own request"
            if as_decider
            else "a requester cannot correct their own request as its approver"
        )
    if as_decider and request.corrected_by_id == actor.pk:
        raise ApprovalDenied(
            "the approver who corrected a request cannot also approve it: another approver decides"
        )
    _require_newest(request)
    if request.payload_hash != payload_hash:
        raise StaleRevision(
            f"{request} changed since it was shown: the payload hash does not match"
        )
    if request.state != RequestState.AWAITING_APPROVAL:
        raise InvalidRequestState(
            f"{request} is {request.get_state_display().lower()}, not awaiting approval"
        )
    return request


def _decide(
    *,
    workspace_id: int,
    number: int,
    revision: int,
    actor,
    payload_hash: str,
    decision: str,
    reason: str,
    workflow: str,
) -> tuple[Request, Approval]:
    request = _locked_for_review(
        workspace_id=workspace_id,
        number=number,
        revision=revision,
        workflow=workflow,
        actor=actor,
        payload_hash=payload_hash,
        as_decider=True,
    )
    rules = rules_for(workflow)
    if decision == Decision.APPROVE and (
        problems := payload_problems(workflow, request.payload, rules)
    ):
        # The rules changed since the request was validated: approving it would break the rules in force.
        raise InvalidPayload([f"under rules {rules.version}: {p}" for p in problems])
    approval = Approval.objects.create(
        request=request,
        revision=request.revision,
        decision=decision,
        reason=reason,
        decided_by=actor,
        payload_hash=request.payload_hash,
        rule_version=rules.version,
    )
    _move(
        request,
        RequestState.APPROVED if decision == Decision.APPROVE else RequestState.REJECTED,
        actor=actor,
        reason=reason,
    )
    return request, approval


def _on_call_owner(workspace: Workspace):
    if workspace.on_call_id:
        return workspace.on_call
    membership = (
        Membership.objects.filter(workspace=workspace, role=Role.OPERATOR)
        .select_related("user")
        .order_by("id")
        .first()
    )
    return membership.user if membership else None


def request_approve(
    *,
    workspace_id: int,
    number: int,
    revision: int,
    actor,
    payload_hash: str,
    reason: str = "",
    workflow: str = "onboarding",
) -> Handoff:
    """Approve exactly the revision and payload the approver saw, and record its handoff with it.

    The handoff is sent only when the workflow's mode sends for this workspace; otherwise it is recorded
    as observed (what would have been sent, never sent)."""
    with transaction.atomic(using=DB):
        request, approval = _decide(
            workspace_id=workspace_id,
            number=number,
            revision=revision,
            actor=actor,
            payload_hash=payload_hash,
            decision=Decision.APPROVE,
            reason=reason,
            workflow=workflow,
        )
        _, sends = WorkflowMode.objects.effective(workflow, request.workspace_id)
        return outbox_services.handoff_record(
            workflow=workflow,
            workspace_id=request.workspace_id,
            source_ref=f"request {request.number} revision {request.revision}",
            source_id=request.pk,
            action_key=request.action_key,
            payload=request.payload,
            rule_version=approval.rule_version,
            owner=_on_call_owner(request.workspace),
            actor=actor,
            observe_only=not sends,
            steps=steps_of(approval.rule_version),
        )


def request_reject(
    *,
    workspace_id: int,
    number: int,
    revision: int,
    actor,
    payload_hash: str,
    reason: str,
    workflow: str = "onboarding",
) -> Request:
    if not reason.strip():
        raise InvalidPayload(["a reason is required to reject a request"])
    with transaction.atomic(using=DB):
        request, _ = _decide(
            workspace_id=workspace_id,
            number=number,
            revision=revision,
            actor=actor,
            payload_hash=payload_hash,
            decision=Decision.REJECT,
            reason=reason,
            workflow=workflow,
        )
    return request


def revision_add_locked(
    current: Request, *, payload: dict, actor, reason: str = "", corrected_by=None
) -> Request:
    """The next revision after `current`, the newest revision, locked by the caller inside its transaction.

    One still undecided is superseded; a decided one (approved, rejected, cancelled) stays exactly as it
    was, with its handoff: the new revision needs its own approval and gets its own action key."""
    if current.state in (
        RequestState.RECEIVED,
        RequestState.VALIDATED,
        RequestState.AWAITING_APPROVAL,
    ):
        _move(
            current,
            RequestState.SUPERSEDED,
            actor=actor,
            reason=reason or "replaced by a newer revision",
        )
    return revision_create(
        workflow=current.workflow,
        workspace_id=current.workspace_id,
        number=current.number,
        revision=current.revision + 1,
        payload=payload,
        requested_by=current.requested_by,
        actor=actor,
        reason=reason or f"revision {current.revision + 1}",
        corrected_by=corrected_by,
    )


def request_revise(
    *,
    workspace_id: int,
    number: int,
    payload: dict,
    actor,
    reason: str = "",
    workflow: str = "onboarding",
) -> Request:
    """A new revision of a request. One awaiting approval is replaced; a decided one stays as it was."""
    _validated_payload(workflow, payload)
    with transaction.atomic(using=DB):
        current = (
            Request.objects.select_for_update(no_key=True)
            .filter(workspace_id=workspace_id, workflow=workflow, number=number)
            .order_by("-revision")
            .first()
        )
        if current is None:
            raise RequestNotFound(f"no {workflow} request {number} in workspace {workspace_id}")
        return revision_add_locked(current, payload=payload, actor=actor, reason=reason)


def request_revise_by_requester(
    *,
    workspace_id: int,
    number: int,
    payload: dict,
    actor,
    reason: str = "",
    keep_if_missing: Iterable[str] = (),
    workflow: str = "onboarding",
) -> Request:
    """The requester's own change to their request: a new revision that needs a new approval.

    Only the requester who submitted it, still a requester of the workspace, may revise it, and only while
    nothing was handed off for it: an approved request is changed by an operator's correction. Fields named in
    `keep_if_missing` (shown hidden, e.g. an e-mail address) keep their current value unless given."""
    _require_member(actor, workspace_id, Role.REQUESTER)
    with transaction.atomic(using=DB):
        # Locked, so that an approval cannot slip in between this check and the new revision.
        current = (
            Request.objects.select_for_update(no_key=True)
            .filter(workspace_id=workspace_id, workflow=workflow, number=number)
            .order_by("-revision")
            .first()
        )
        if current is None:
            raise RequestNotFound(f"no {workflow} request {number} in workspace {workspace_id}")
        if current.requested_by_id != actor.pk:
            raise ApprovalDenied(
                f"request {number} was submitted by someone else; only its requester revises it"
            )
        if current.state not in REQUESTER_REVISABLE_STATES:
            raise InvalidRequestState(
                f"request {number} is {current.get_state_display().lower()}; "
                "only a request awaiting approval or rejected can be revised"
            )
        kept = {
            k: current.payload[k]
            for k in keep_if_missing
            if k in current.payload and k not in payload
        }
        return request_revise(
            workspace_id=workspace_id,
            number=number,
            payload={**payload, **kept},
            actor=actor,
            reason=reason or f"revised by {actor}",
            workflow=workflow,
        )


def _corrected_payload(handoff: Handoff, edits: dict[str, str]) -> dict:
    """The approved payload with the operator's edits: a sensitive field shown blank and left blank keeps
    its value (nobody retypes a secret they cannot see), a missing field left blank stays missing; fields
    not offered for editing are kept. A step's `operation` belongs to the workflow, not to the request."""
    payload = base_payload(handoff.payload)
    for field in correction_fields(handoff):
        value = edits.get(field["name"])
        if value is None or ((field["sensitive"] or field["missing"]) and value == ""):
            continue
        payload[field["name"]] = value
    return payload


def handoff_correct(*, handoff_id: int, actor, edits: dict[str, str], reason: str) -> Request:
    """Correct a handoff that needs attention: a new request revision (new approval, new action key);
    the old handoff becomes superseded and its request revision too. The state is checked under the lock."""
    handoff = Handoff.objects.filter(pk=handoff_id).first()
    if handoff is None:
        raise RequestNotFound(f"no handoff {handoff_id}")
    _require_member(actor, handoff.workspace_id, Role.OPERATOR)
    if not reason.strip():
        raise InvalidPayload(["a reason is required to correct a handoff"])
    if not handoff.correctable_alone:
        raise InvalidRequestState(
            f"{handoff.action_key} is a later step of workflow {handoff.instance_key}, whose earlier steps were "
            "delivered: a corrected revision would run them again under new keys. Compensate the workflow "
            "instead, then submit a new request"
        )
    payload = _corrected_payload(handoff, edits)
    _validated_payload(handoff.workflow, payload)
    with transaction.atomic(using=DB):
        old = Request.objects.select_for_update(no_key=True).get(pk=handoff.source_id)
        try:
            outbox_services.handoff_supersede(
                handoff_id=handoff.pk,
                actor=actor,
                reason=f"corrected: {reason}",
                only_from=(HandoffState.NEEDS_ATTENTION,),
            )
        except InvalidTransition as exc:
            raise InvalidRequestState(
                f"{handoff.action_key} is {exc.from_state}; only a handoff that needs "
                "attention can be corrected"
            ) from exc
        _move(
            old,
            RequestState.SUPERSEDED,
            actor=actor,
            reason=f"corrected after handoff failure: {reason}",
        )
        return request_revise(
            workspace_id=old.workspace_id,
            number=old.number,
            payload=payload,
            actor=actor,
            reason=f"correction of revision {old.revision}: {reason}",
            workflow=old.workflow,
        )


# --- Rule versions and delivery modes ---------------------------------------------------------


def rule_version_publish(
    *, workflow: str, schema: dict, actor, notes: str = "", steps: list[dict] | None = None
) -> RuleVersion:
    """New rules for a workflow: a new version, in force from now on. Earlier decisions keep theirs.
    `steps` make it a workflow of several steps, each its own handoff (see outbox/steps.py). `actor` None is
    a management command acting for whoever runs the deployment (the demo); people need the permission."""
    if actor is not None and not actor.has_perm("approvals.add_ruleversion"):
        raise ApprovalDenied(f"{actor} may not publish rules")
    if problems := publish_problems(schema) + steps_problems(steps or []):
        raise InvalidPayload(problems)
    with transaction.atomic(using=DB):
        latest = (
            RuleVersion.objects.select_for_update()
            .filter(workflow=workflow)
            .order_by("-number")
            .first()
        )
        if latest is None and workflow in BUILT_IN_RULES:
            # The built-in rules are version 1; store them so that their number is never reused.
            built_in = BUILT_IN_RULES[workflow]
            latest = RuleVersion.objects.create(
                workflow=workflow,
                number=1,
                version=built_in.version,
                schema=built_in.schema,
                notes="built-in rules",
            )
        number = latest.number + 1 if latest else 1
        return RuleVersion.objects.create(
            workflow=workflow,
            number=number,
            version=f"{workflow}-v{number}",
            schema=schema,
            steps=steps or [],
            notes=notes,
            created_by=actor,
        )


def workflow_mode_set(
    *, workflow: str, mode: str, actor, reason: str, allowed_workspace_ids: list[int] | None = None
) -> WorkflowMode:
    """Change how far a workflow acts, and audit the change (who, when, from, to, why).

    `allowed_workspace_ids` is the allow-list of limited mode; it is kept as given for the other modes
    (None keeps the current list)."""
    if mode not in Mode.values:
        raise InvalidPayload([f"unknown mode {mode!r}; one of {', '.join(Mode.values)}"])
    if not reason.strip():
        raise InvalidPayload(["a reason is required to change a mode"])
    if not actor.has_perm("approvals.change_workflowmode"):
        raise ApprovalDenied(f"{actor} may not change delivery modes")
    with transaction.atomic(using=DB):
        current = WorkflowMode.objects.select_for_update().filter(workflow=workflow).first()
        before = sorted(current.allowed_workspaces.values_list("id", flat=True)) if current else []
        after = before if allowed_workspace_ids is None else sorted(set(allowed_workspace_ids))
        missing = set(after) - set(
            Workspace.objects.filter(id__in=after).values_list("id", flat=True)
        )
        if missing:
            raise WorkspaceNotFound(", ".join(str(w) for w in sorted(missing)))
        from_mode = current.mode if current else settings.WORKFLOW_DEFAULT_MODE
        if current is None:
            current = WorkflowMode.objects.create(workflow=workflow, mode=mode, updated_by=actor)
        else:
            current.mode = mode
            current.updated_by = actor
            current.save(update_fields=["mode", "updated_by", "updated_at"])
        current.allowed_workspaces.set(after)
        WorkflowModeChange.objects.create(
            workflow=workflow,
            from_mode=from_mode,
            to_mode=mode,
            from_allowed=before,
            to_allowed=after,
            changed_by=actor,
            reason=reason,
        )
    return current


# --- Roles and support staff ------------------------------------------------------------------


def _role_change_checks(*, workspace_id: int, role: str, actor, reason: str, perm: str) -> None:
    if role not in Role.values:
        raise InvalidPayload([f"unknown role {role!r}; one of {', '.join(Role.values)}"])
    if not reason.strip():
        raise InvalidPayload(["a reason is required to change a role"])
    if not actor.has_perm(perm):
        raise ApprovalDenied(f"{actor} may not change roles")
    if not Workspace.objects.filter(pk=workspace_id).exists():
        raise WorkspaceNotFound(workspace_id)


def membership_grant(*, workspace_id: int, user, role: str, actor, reason: str) -> Membership:
    """Give `user` a role in a workspace, with its audit record (who, whose, which role, why)."""
    _role_change_checks(
        workspace_id=workspace_id,
        role=role,
        actor=actor,
        reason=reason,
        perm="approvals.add_membership",
    )
    with transaction.atomic(using=DB):
        if Membership.objects.filter(user=user, workspace_id=workspace_id, role=role).exists():
            raise RoleChangeRefused(f"{user} is already {role} in workspace {workspace_id}")
        membership = Membership.objects.create(user=user, workspace_id=workspace_id, role=role)
        RoleChange.objects.create(
            workspace_id=workspace_id,
            user=user,
            role=role,
            action=RoleChange.Action.GRANT,
            changed_by=actor,
            reason=reason,
        )
    return membership


def membership_revoke(*, workspace_id: int, user, role: str, actor, reason: str) -> None:
    """Take a role away, with its audit record."""
    _role_change_checks(
        workspace_id=workspace_id,
        role=role,
        actor=actor,
        reason=reason,
        perm="approvals.delete_membership",
    )
    with transaction.atomic(using=DB):
        deleted, _ = Membership.objects.filter(
            user=user, workspace_id=workspace_id, role=role
        ).delete()
        if not deleted:
            raise RoleChangeRefused(f"{user} is not {role} in workspace {workspace_id}")
        RoleChange.objects.create(
            workspace_id=workspace_id,
            user=user,
            role=role,
            action=RoleChange.Action.REVOKE,
            changed_by=actor,
            reason=reason,
        )


SUPPORT_GROUP = "support staff"
# Support staff read the records below in Django admin and may run two safe actions on handoffs
# (reconcile, assign); nothing else. Each entry is (app label, model, permission codename).
SUPPORT_VIEWS = {
    "approvals": (
        "workspace",
        "membership",
        "rolechange",
        "request",
        "requestevent",
        "approval",
        "triggerrecord",
        "requestreference",
        "ruleversion",
        "workflowmode",
        "workflowmodechange",
        "workspaceworkflow",
    ),
    "outbox": ("handoff", "attempt", "handoffevent"),
    "reconciliation": ("reconciliationrun", "finding", "findingevent", "alertrecord"),
    "delivery": ("receivertask", "seenmessage"),
}
SUPPORT_ACTIONS = {
    (
        "outbox",
        "handoff",
        "reconcile_handoff",
    ): "Can reconcile handoffs (asks the receiver, sends nothing)",
    (
        "outbox",
        "handoff",
        "assign_handoff",
    ): "Can assign handoffs to an operator of their workspace",
}


def _support_permissions() -> list[Permission]:
    wanted = []
    for app_label, models in SUPPORT_VIEWS.items():
        for model in models:
            content_type = ContentType.objects.get_for_model(apps.get_model(app_label, model))
            wanted.append(
                Permission.objects.get_or_create(
                    content_type=content_type,
                    codename=f"view_{model}",
                    defaults={
                        "name": f"Can view {apps.get_model(app_label, model)._meta.verbose_name}"
                    },
                )[0]
            )
    for (app_label, model, codename), name in SUPPORT_ACTIONS.items():
        content_type = ContentType.objects.get_for_model(apps.get_model(app_label, model))
        wanted.append(
            Permission.objects.get_or_create(
                content_type=content_type, codename=codename, defaults={"name": name}
            )[0]
        )
    return wanted


def support_group_sync() -> Group:
    """The support staff group with exactly its permissions (extra ones are removed). Safe to run again."""
    with transaction.atomic(using=DB):
        group, _ = Group.objects.get_or_create(name=SUPPORT_GROUP)
        group.permissions.set(_support_permissions())
    return group


def support_staff_enroll(*, user) -> None:
    """Make `user` support staff: admin access through the support group, never a superuser."""
    group = support_group_sync()
    with transaction.atomic(using=DB):
        user.is_staff = True
        user.is_superuser = False
        user.save(update_fields=["is_staff", "is_superuser"])
        user.groups.set([group])


DESTINATION_ADMINS_GROUP = "Destination admins"


def destination_admins_group_sync() -> Group:
    """The group whose members may set destinations' limits (they still need an operator role): exactly the
    `outbox.set_destination_limits` permission (extra ones are removed). Safe to run again."""
    app_label, codename = SET_LIMITS_PERMISSION.split(".")
    model = apps.get_model(app_label, "destinationhealth")
    with transaction.atomic(using=DB):
        permission, _ = Permission.objects.get_or_create(
            content_type=ContentType.objects.get_for_model(model),
            codename=codename,
            defaults={"name": dict(model._meta.permissions)[codename]},
        )
        group, _ = Group.objects.get_or_create(name=DESTINATION_ADMINS_GROUP)
        group.permissions.set([permission])
    return group


def destination_admin_enroll(*, user) -> None:
    """Put `user` in the destination admins group (other groups and roles unchanged). Safe to run again."""
    user.groups.add(destination_admins_group_sync())


# --- Approvers correct, anyone entitled cancels ------------------------------------------------------


def request_correct_by_approver(
    *,
    workspace_id: int,
    number: int,
    revision: int,
    actor,
    payload_hash: str,
    edits: dict[str, str],
    reason: str,
    workflow: str = "onboarding",
) -> Request:
    """An approver sends the request back changed: a new revision with the approver's change and reason,
    which needs a fresh approval by another approver (the corrector may not approve it)."""
    if not reason.strip():
        raise InvalidPayload(["a reason is required to correct a request"])
    with transaction.atomic(using=DB):
        current = _locked_for_review(
            workspace_id=workspace_id,
            number=number,
            revision=revision,
            workflow=workflow,
            actor=actor,
            payload_hash=payload_hash,
            as_decider=False,
        )
        offered = approver_correctable(current.payload)
        if not_offered := sorted(set(edits) - set(offered)):
            raise InvalidPayload(
                [
                    f"{name} cannot be corrected here; the fields offered are "
                    f"{', '.join(sorted(offered)) or 'none'}"
                    for name in not_offered
                ]
            )
        payload = _validated_payload(
            workflow, {**current.payload, **{k: v for k, v in edits.items() if v != ""}}
        )
        return revision_add_locked(
            current,
            payload=payload,
            actor=actor,
            corrected_by=actor,
            reason=f"corrected by approver {actor}: {reason}",
        )


def _may_cancel(actor, request: Request) -> None:
    if not may_cancel(actor, request):
        raise ApprovalDenied(
            "a request is cancelled by its requester before it is decided, or by an operator"
        )


def request_cancel(
    *, workspace_id: int, number: int, actor, reason: str, workflow: str = "onboarding"
) -> Request:
    """Cancel a request, whatever its state: before approval it is cancelled; approved with nothing delivered,
    its waiting handoffs are cancelled with it; once a step was delivered, cancelling means compensating
    (`outbox.services.instance_compensate`), which this refuses to do silently."""
    if not reason.strip():
        raise InvalidPayload(["a reason is required to cancel a request"])
    with transaction.atomic(using=DB):
        current = (
            Request.objects.select_for_update(no_key=True)
            .filter(workspace_id=workspace_id, workflow=workflow, number=number)
            .order_by("-revision")
            .first()
        )
        if current is None:
            raise RequestNotFound(f"no {workflow} request {number} in workspace {workspace_id}")
        _may_cancel(actor, current)
        code = (
            "cancelled_by_requester"
            if current.requested_by_id == actor.pk
            else "cancelled_by_operator"
        )
        if current.state == RequestState.APPROVED:
            outbox_services.instance_cancel(
                instance_key=current.action_key, actor=actor, reason=reason, reason_code=code
            )
        _move(current, RequestState.CANCELLED, actor=actor, reason=reason, reason_code=code)
        return current
