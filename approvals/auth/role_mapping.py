"""The mapping from an identity provider's groups to workspace roles, read from settings; writes nothing.

The mapping is JSON: each group names the roles its members hold, for example
`{"handoff-ws7-approvers": [{"workspace": 7, "role": "approver"}]}` (docs/sso.md). The roles that
appear anywhere in it are the ones the provider manages: at each sign-in a person holds exactly those
of them that their groups give; roles no group maps to are left as the console set them.
"""

from dataclasses import dataclass

from django.core.exceptions import ImproperlyConfigured

from approvals.models import Role


@dataclass(frozen=True, order=True)
class WorkspaceRole:
    workspace_id: int
    role: str


@dataclass(frozen=True)
class RoleMapping:
    by_group: dict[str, frozenset[WorkspaceRole]]

    @property
    def managed(self) -> frozenset[WorkspaceRole]:
        """Every role the provider decides: those some group gives."""
        return frozenset().union(*self.by_group.values()) if self.by_group else frozenset()

    def roles_for(self, groups: list[str]) -> frozenset[WorkspaceRole]:
        return frozenset().union(*(self.by_group.get(group, frozenset()) for group in groups))


def _entry(group: str, entry) -> WorkspaceRole:
    if not isinstance(entry, dict) or set(entry) != {"workspace", "role"}:
        raise ImproperlyConfigured(
            f'OIDC role mapping, group {group!r}: each entry is {{"workspace": id, "role": name}}'
        )
    workspace, role = entry["workspace"], entry["role"]
    if isinstance(workspace, bool) or not isinstance(workspace, int) or workspace < 1:
        raise ImproperlyConfigured(
            f"OIDC role mapping, group {group!r}: bad workspace {workspace!r}"
        )
    if role not in Role.values:
        raise ImproperlyConfigured(
            f"OIDC role mapping, group {group!r}: unknown role {role!r}; one of {', '.join(Role.values)}"
        )
    return WorkspaceRole(workspace_id=workspace, role=role)


def role_mapping_parse(raw) -> RoleMapping:
    """The mapping as settings hold it, checked: a wrong entry is a configuration error, named."""
    if not isinstance(raw, dict):
        raise ImproperlyConfigured(
            "OIDC role mapping: a JSON object of group name to a list of roles"
        )
    by_group = {}
    for group, entries in raw.items():
        if not isinstance(entries, list):
            raise ImproperlyConfigured(f"OIDC role mapping, group {group!r}: a list of roles")
        by_group[group] = frozenset(_entry(group, entry) for entry in entries)
    return RoleMapping(by_group=by_group)


def groups_from_claims(claims: dict, claim: str) -> list[str]:
    """The person's groups: a list of names (Keycloak, Entra ID), or one name; anything else is none."""
    value = claims.get(claim)
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [group for group in value if isinstance(group, str)]
    return []
