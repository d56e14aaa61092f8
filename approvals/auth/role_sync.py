"""Workspace roles made to follow the identity provider's groups at each sign-in, audited.

Every grant and revocation writes a `RoleChange` row in the same transaction, exactly as a change made in
the console does (approvals/services/memberships.py); the actor is the identity provider's own account
(`OIDC_ROLE_SYNC_ACTOR`, never able to sign in) and the reason names the groups and the claim.
"""

import logging
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction

from approvals.auth.role_mapping import (
    WorkspaceRole,
    groups_from_claims,
    role_mapping_parse,
)
from approvals.models import Membership, RoleChange, Workspace
from lib.databases import DB

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RoleSync:
    granted: tuple[WorkspaceRole, ...]
    revoked: tuple[WorkspaceRole, ...]


def role_sync_actor():
    """The account role changes at sign-in are recorded under: inactive, without a usable password."""
    actor, created = get_user_model().objects.get_or_create(
        username=settings.OIDC_ROLE_SYNC_ACTOR, defaults={"is_active": False}
    )
    if created:
        actor.set_unusable_password()
        actor.save(update_fields=["password"])
    elif actor.is_active or actor.has_usable_password():
        # The audit would say a person changed the roles: refuse rather than borrow their name.
        raise ImproperlyConfigured(
            f"OIDC_ROLE_SYNC_ACTOR {actor.username!r} is a person's account; name an unused one"
        )
    return actor


def _held(user, managed: frozenset[WorkspaceRole]) -> set[WorkspaceRole]:
    rows = Membership.objects.filter(user=user).values_list("workspace_id", "role")
    return {WorkspaceRole(workspace_id=ws, role=role) for ws, role in rows} & managed


def _existing(wanted: frozenset[WorkspaceRole]) -> set[WorkspaceRole]:
    ids = set(
        Workspace.objects.filter(pk__in={r.workspace_id for r in wanted}).values_list(
            "pk", flat=True
        )
    )
    missing = {r.workspace_id for r in wanted} - ids
    if missing:
        log.warning("OIDC role mapping names workspaces that do not exist: %s", sorted(missing))
    return {r for r in wanted if r.workspace_id in ids}


def _audit(*, user, change: WorkspaceRole, action: str, actor, reason: str) -> None:
    RoleChange.objects.create(
        workspace_id=change.workspace_id,
        user=user,
        role=change.role,
        action=action,
        changed_by=actor,
        reason=reason,
    )


def memberships_sync_from_claims(*, user, claims: dict) -> RoleSync:
    """Give `user` the mapped roles their groups carry and take away the mapped ones they no longer do.

    Roles that no group of the mapping gives are not the provider's to decide and stay as they are."""
    mapping = role_mapping_parse(settings.OIDC_ROLE_MAPPING)
    claim = settings.OIDC_GROUPS_CLAIM
    groups = groups_from_claims(claims, claim)
    with transaction.atomic(using=DB):
        actor = role_sync_actor()
        held = _held(user, mapping.managed)
        wanted = _existing(mapping.roles_for(groups))
        granted = tuple(sorted(wanted - held))
        revoked = tuple(sorted(held - wanted))
        for change in granted:
            Membership.objects.create(user=user, workspace_id=change.workspace_id, role=change.role)
            giving = sorted(g for g in groups if change in mapping.by_group.get(g, ()))
            reason = f"sign-in: identity provider claim {claim!r} has group(s) {', '.join(giving)}"
            _audit(
                user=user, change=change, action=RoleChange.Action.GRANT, actor=actor, reason=reason
            )
        for change in revoked:
            Membership.objects.filter(
                user=user, workspace_id=change.workspace_id, role=change.role
            ).delete()
            reason = (
                f"sign-in: no group in identity provider claim {claim!r} gives this role any more"
            )
            _audit(
                user=user,
                change=change,
                action=RoleChange.Action.REVOKE,
                actor=actor,
                reason=reason,
            )
    return RoleSync(granted=granted, revoked=revoked)
