"""Who owns a workspace's failures: its on-call operator, else its first operator, else a fallback (the
workflow's owner from its pilot brief, else the organisation-wide on-call named by
`HANDOFF_FALLBACK_ON_CALL`). An approved handoff and an incident get their owner here, so that no failure
is left without one (docs/incidents.md, "No failure without an owner").

A workspace that takes triggers with no operator and no fallback configured is a warning when the
processes are deployed (`manage.py check --database default`; `migrate` runs it)."""

from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core import checks
from django.db import DatabaseError

from approvals.models import Membership, PilotBrief, Role, Workspace, WorkspaceWorkflow
from lib.databases import DB


def active_operators(workspace_id):
    """The workspace's operator memberships whose person can still act (an active user): the one rule of
    who may own a failure (`workspace_operator_id`, the assignee check `may_own_failures_of`, the
    console's "owner: nobody", an incident's owner and acknowledgement). `workspace_id` may be an
    `OuterRef` for a subquery."""
    return Membership.objects.using(DB).filter(
        workspace_id=workspace_id, role=Role.OPERATOR, user__is_active=True
    )


def workspace_operator_id(workspace_id: int) -> int | None:
    """The workspace's on-call operator, else its first operator; None when it has no operator. Only a
    person who can act counts: an on-call who was deactivated or is no operator of it any more is passed
    over, as is a deactivated operator."""
    operators = active_operators(workspace_id)
    on_call = (
        Workspace.objects.using(DB)
        .filter(pk=workspace_id, on_call_id__in=operators.values("user_id"))
        .values_list("on_call_id", flat=True)
        .first()
    )
    if on_call is not None:
        return on_call
    return operators.order_by("pk").values_list("user_id", flat=True).first()


def configured_fallback_id() -> int | None:
    """The active user `HANDOFF_FALLBACK_ON_CALL` names; None when it is unset or names nobody active."""
    name = settings.HANDOFF_FALLBACK_ON_CALL
    if not name:
        return None
    users = get_user_model().objects.using(DB)
    return users.filter(username=name, is_active=True).values_list("pk", flat=True).first()


def fallback_on_call_id(*, workflow: str = "") -> int | None:
    """Who owns a failure nobody in its workspace can: the workflow's owner, else the configured one."""
    if workflow:
        owner = (
            PilotBrief.objects.using(DB)
            .filter(workflow=workflow, owner__is_active=True)
            .values_list("owner_id", flat=True)
            .first()
        )
        if owner is not None:
            return owner
    return configured_fallback_id()


def failure_owner_id(workspace_id: int | None, *, workflow: str = "") -> int | None:
    """The owner of a failure of this workspace (None: of no workspace, as security events)."""
    if workspace_id is not None:
        operator = workspace_operator_id(workspace_id)
        if operator is not None:
            return operator
    return fallback_on_call_id(workflow=workflow)


def workspaces_without_operator() -> list[Workspace]:
    """Workspaces that take triggers (no workflow rows, or one that accepts) and have no active operator
    (an on-call who is no active operator does not count: `workspace_operator_id` passes them over)."""
    operated = (
        Membership.objects.using(DB)
        .filter(role=Role.OPERATOR, user__is_active=True)
        .values("workspace_id")
    )
    refusing_all = (
        WorkspaceWorkflow.objects.using(DB)
        .exclude(
            workspace_id__in=WorkspaceWorkflow.objects.filter(accepts_triggers=True).values(
                "workspace_id"
            )
        )
        .values("workspace_id")
    )
    return list(
        Workspace.objects.using(DB)
        .exclude(pk__in=operated)
        .exclude(pk__in=refusing_all)
        .order_by("pk")
    )


@dataclass(frozen=True)
class FallbackDuty:
    """Health's line for the fallback on-call: the workspaces whose failures they own."""

    owner: str
    workspaces: list[Workspace]


def fallback_duty_for(user) -> FallbackDuty | None:
    """Shown to the configured fallback on-call and to staff; None to others, or when every workspace
    that takes triggers has an operator."""
    fallback = configured_fallback_id()
    if not user.is_staff and (fallback is None or user.pk != fallback):
        return None
    workspaces = workspaces_without_operator()
    if not workspaces:
        return None
    return FallbackDuty(settings.HANDOFF_FALLBACK_ON_CALL if fallback else "", workspaces)


@checks.register(checks.Tags.database)
def unowned_workspaces_check(
    app_configs=None, databases=None, **kwargs
) -> list[checks.CheckMessage]:
    """A warning per workspace whose failures would have no owner (run when the database is checked)."""
    if not databases or DB not in databases:
        return []
    try:
        if configured_fallback_id() is not None:
            return []
        unowned = workspaces_without_operator()
    except DatabaseError:
        return []  # Not migrated yet: `migrate` checks before it creates the tables.
    named = settings.HANDOFF_FALLBACK_ON_CALL
    hint = (
        f"HANDOFF_FALLBACK_ON_CALL names {named!r}, who is no active user"
        if named
        else "give it an operator, or set HANDOFF_FALLBACK_ON_CALL to a user name"
    )
    return [
        checks.Warning(
            f"workspace {ws.pk} ({ws.name}) takes triggers and has no operator: its failures "
            "would have no owner and page nobody",
            hint=f"{hint} (docs/incidents.md)",
            obj=ws,
            id="approvals.W001",
        )
        for ws in unowned
    ]
