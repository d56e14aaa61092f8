"""The handoff list filter: workspace, state (with "retrying"), failure class, owner, age and text."""

from typing import NamedTuple

import django_filters
from django.core.exceptions import ValidationError
from django.db.models import Exists, OuterRef, Q, QuerySet

from approvals.models import Membership, Role
from approvals.on_call import active_operators
from approvals.selectors import workspace_names
from lib.paging import keyset_page
from lib.search_syntax import BadSearch, is_whole_key, request_number, search_typed
from outbox.models import AGE_CHOICES, FailureClass, HandoffState
from outbox.search_text import text_search
from reconciliation.selectors import needing_person

RETRYING = "retrying"
OPEN = "open"
ATTENTION = "attention"
# Whose handoffs: the workspaces' own (the default), the product's alert notifications, or both.
NOTIFICATIONS = "notifications"
ALL_ORIGINS = "all"
ORIGIN_CHOICES = [(NOTIFICATIONS, "Alert notifications only"), (ALL_ORIGINS, "Both")]
ORIGINS = tuple(value for value, _label in ORIGIN_CHOICES)

STATE_CHOICES = [
    (ATTENTION, "Needs a person (needs attention, uncertain, or an open finding)"),
    (OPEN, "Open (not delivered yet)"),
    (RETRYING, "Retrying (waiting in backoff)"),
    *HandoffState.choices,
]


def readable_search(value: str) -> None:
    """The search box takes what the request search takes (`lib/search_syntax.py`, one limit for every
    search): a longer text is refused with the reason, and a filter holding it is not applied at all."""
    try:
        search_typed(value)
    except BadSearch as refused:
        raise ValidationError(str(refused)) from refused


class Operator(NamedTuple):
    """An operator as the list's owner filter and assign menu name them (`op.pk`, `op.get_username`)."""

    pk: int
    username: str
    active: bool

    def get_username(self) -> str:
        return self.username


def operators_in(workspace_ids: list[int]) -> list[tuple[int, Operator]]:
    """(workspace, operator) for every operator role held in the workspaces, by username: one query that
    both the owner filter's choices (`HandoffFilter`) and the list's assign menu (`assign_targets`) read."""
    rows = (
        Membership.objects.filter(workspace_id__in=workspace_ids, role=Role.OPERATOR)
        .order_by("user__username", "workspace_id")
        .values_list("workspace_id", "user_id", "user__username", "user__is_active")
    )
    return [(ws, Operator(pk, name, active)) for ws, pk, name, active in rows]


def assign_targets(roles: list[tuple[int, Operator]], workspace_ids) -> list[Operator]:
    """Active operators of any of `workspace_ids`, by username, each once: what `approvals.selectors.operators_of`
    answers, from `operators_in`'s rows."""
    chosen = set(workspace_ids)
    return list({op.pk: op for ws, op in roles if ws in chosen and op.active}.values())


def owner_who_cannot_act() -> Q:
    """Owned by nobody who can act on it: no owner, or one who was deactivated or is no operator of the
    handoff's workspace any more (they left, or their role was lowered): such a failure is listed as unowned."""
    acts = active_operators(OuterRef("workspace_id")).filter(user_id=OuterRef("owner_id"))
    return Q(owner__isnull=True) | ~Exists(acts)


class HandoffFilter(django_filters.FilterSet):
    workspace = django_filters.ChoiceFilter(
        field_name="workspace_id", label="Workspace", empty_label="all"
    )
    state = django_filters.ChoiceFilter(
        choices=STATE_CHOICES, method="filter_state", empty_label="any"
    )
    failure_class = django_filters.ChoiceFilter(
        choices=FailureClass.choices, label="Failure", empty_label="any"
    )
    reason_code = django_filters.CharFilter(field_name="reason_code", label="Reason code")
    owner = django_filters.ChoiceFilter(method="filter_owner", label="Owner", empty_label="anyone")
    age = django_filters.ChoiceFilter(
        choices=AGE_CHOICES, method="filter_age", label="Age", empty_label="any"
    )
    step = django_filters.CharFilter(field_name="step", label="Workflow step")
    destination = django_filters.CharFilter(field_name="destination", label="Destination")
    q = django_filters.CharFilter(
        method="filter_text",
        label="Search: client, e-mail, searchable field, key or request",
        validators=[readable_search],
    )
    origin = django_filters.ChoiceFilter(
        choices=ORIGIN_CHOICES, method="filter_origin", label="Of", empty_label="the workspaces"
    )

    def __init__(
        self,
        data=None,
        queryset=None,
        *,
        request=None,
        workspace_ids: list[int] | None = None,
        operators: list[tuple[int, Operator]] | None = None,
        **kwargs,
    ):
        """`operators`: `operators_in(workspace_ids)` when the caller read it already (else read here)."""
        super().__init__(data, queryset, request=request, **kwargs)
        # The workspaces' own handoffs unless the product's alert notifications are asked for: those are
        # counted apart (Health's alert-channel line), never as a workspace's business. Unbound too.
        if self.queryset is not None and (data or {}).get("origin") not in ORIGINS:
            self.queryset = self.queryset.business()
        ids = list(workspace_ids or [])
        self.filters["workspace"].extra["choices"] = [
            (str(pk), f"{name} (#{pk})") for pk, name in workspace_names(ids).items()
        ]
        if operators is None:
            operators = operators_in(ids)
        named = {op.pk: op.username for _ws, op in operators}
        self.filters["owner"].extra["choices"] = [("me", "me"), ("nobody", "nobody")] + [
            (str(pk), name) for pk, name in named.items()
        ]

    def filter_state(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        if value == RETRYING:
            return queryset.retrying()
        if value == ATTENTION:
            return needing_person(queryset)
        if value == OPEN:
            return queryset.open()
        return queryset.filter(state=value)

    def filter_owner(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        if value == "me":
            return queryset.filter(owner=self.request.user) if self.request else queryset.none()
        if value == "nobody":
            return queryset.filter(owner_who_cannot_act())
        return queryset.filter(owner_id=value)

    def filter_age(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return queryset.older_than(value)

    def filter_origin(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return queryset.notifications() if value == NOTIFICATIONS else queryset

    def filter_text(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        text = value.strip()
        if not text:
            return queryset
        number = request_number(text)
        if number is not None:
            return queryset.filter(source_ref__startswith=f"request {number} ")
        if is_whole_key(text):
            # A key typed whole is that handoff, or every step of that instance: two index lookups, where
            # the text search below reads the trigram index (or, on SQLite, every row).
            return queryset.filter(Q(action_key=text) | Q(instance_key=text))
        return text_search(queryset, text)


def handoff_list_page(
    queryset: QuerySet, *, data: dict[str, str], workspace_ids: list[int], after, size: int
) -> tuple[list, bool]:
    """One keyset page of the filtered handoff list (the console's and the CLI's). With no workspace chosen
    it is read one workspace of the person's at a time and merged (`lib.paging.keyset_page` `merge_by`)."""
    return keyset_page(
        queryset,
        after=after,
        size=size,
        merge_by=None if data.get("workspace") else ("workspace_id", workspace_ids),
    )
