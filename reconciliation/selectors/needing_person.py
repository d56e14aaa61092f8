""" "Needs a person", defined once, and the bounded count the header shows on every page."""

from collections.abc import Iterable

from django.db.models import Exists, IntegerField, OuterRef, Q, QuerySet, Subquery

from approvals.models import Workspace
from lib.databases import rows_compiled_once
from outbox.models import NEEDS_PERSON_STATES, Handoff
from reconciliation.models import Finding

# The handoff list's state filter value for `needing_person` (console/filters.py).
NEEDS_PERSON_FILTER = "attention"
# A count shown on every page stops here: "999+" says as much to a person as the exact figure, and counting
# every open row of a large outbox on each page view would cost more the larger the backlog.
COUNT_CAP = 999


def has_live_finding() -> Exists:
    """True for a handoff whose action key has a finding that is not resolved (open or acknowledged)."""
    return Exists(Finding.objects.live().filter(action_key=OuterRef("action_key")))


def needing_person_condition() -> Q:
    """ "Needs a person", defined once: needs attention or uncertain, or any handoff with a live finding.

    A delivered handoff whose task vanished at the receiver is as much a person's problem as a
    rejected one; every needs-a-person figure (header, list filter, health, /metrics) is this set.
    """
    return Q(state__in=NEEDS_PERSON_STATES) | Q(has_live_finding())


def needing_person(handoffs: QuerySet[Handoff]) -> QuerySet[Handoff]:
    return handoffs.filter(needing_person_condition())


class _CountOf(Subquery):
    """COUNT(*) of the rows of a (sliced) subquery, as a scalar: with a slice, a count that stops."""

    template = "(SELECT COUNT(*) FROM (%(subquery)s) AS bounded)"
    output_field = IntegerField()


def needing_person_counts_bounded(
    workspace_ids: Iterable[int], *, cap: int = COUNT_CAP
) -> dict[int, int]:
    """`needing_person` per workspace (of the workspaces that exist), each count stopped past `cap` (a figure
    above `cap` means "more than `cap`"), in one query whose cost does not grow with the outbox or the backlog.
    A workspace where nobody needs a person is left out.

    Per workspace two parts, each read no further than `cap + 1` rows: the handoffs in a person's states
    (`handoff_needs_person_idx`, read alone), and the others whose key has a live finding (driven from the few
    findings). One query with the OR of both would scan the whole outbox, and this runs on every page."""
    ids = list(workspace_ids)
    if not ids:
        return {}
    # Compiled once for these workspaces and cap (`rows_compiled_once`): it runs on every page, and building
    # it through the ORM cost more CPU than the statement (issue 40).
    rows = rows_compiled_once(
        ("needing_person_counts_bounded", tuple(ids), cap), lambda: _bounded_counts(ids, cap)
    )
    counts = {ws: min(n, cap + 1) for ws, n in rows}
    return {ws: counts[ws] for ws in ids if counts.get(ws)}


def _bounded_counts(ids: list[int], cap: int) -> QuerySet:
    of_workspace = Handoff.objects.business().filter(workspace_id=OuterRef("id")).order_by()
    live_keys = Finding.objects.live().values("action_key")
    in_states = of_workspace.filter(state__in=NEEDS_PERSON_STATES).values("id")[: cap + 1]
    with_finding = (
        of_workspace.exclude(state__in=NEEDS_PERSON_STATES)
        .filter(action_key__in=live_keys)
        .values("id")[: cap + 1]
    )
    return (
        Workspace.objects.filter(id__in=ids)
        .order_by()
        .values_list("id")
        .annotate(n=_CountOf(in_states) + _CountOf(with_finding))
    )
