"""The counters of /metrics across retention: before retention deletes a batch of settled handoffs (with their
attempts and events) it calls `carry_over` in the same transaction, which adds what those rows counted to
`ArchivedTotal`; the collector adds `archived_totals()` to what the hot tables count. Both use the rules of
`reconciliation.selectors.figures`, so a counter means the same before and after its rows move."""

from collections import defaultdict
from collections.abc import Callable, Iterable

from django.db import connection
from django.db.models import Count, QuerySet

from lib.databases import ValuesIn
from outbox.models import Attempt, Handoff, HandoffEvent, HandoffState
from reconciliation.models import ArchivedTotal
from reconciliation.selectors.figures import duplicate_preventions, failed_attempts, interventions

COMPLETED = "completed"
DUPLICATE_PREVENTIONS = "duplicate_effect_preventions"
FAILED_ATTEMPTS = "failed_attempts"
MANUAL_INTERVENTIONS = "manual_interventions"
# What manual interventions counted under the rule before a person had to be named (events of a receiver or a
# sweep carried an action): taken once, at the migration that moved to the person's rule
# (reconciliation/migrations/0014), so that the counter did not drop at that deploy. A key of its own: the
# previous release's web processes, still serving during the deploy, never add it to their own count.
INTERVENTIONS_EARLIER_RULE = "manual_interventions_earlier_rule"

Labels = tuple[str, str, str]  # workflow, workspace, further label ("" when the counter has none)


def _completed(ids: list[int]) -> QuerySet:
    return (
        Handoff.objects.filter(pk__in=ValuesIn(ids, "bigint"), state=HandoffState.DELIVERED)
        .order_by()
        .values_list("workflow", "workspace_id")
        .annotate(n=Count("id"))
    )


def _duplicates(ids: list[int]) -> QuerySet:
    return (
        duplicate_preventions(
            Attempt.objects.filter(handoff_id__in=ValuesIn(ids, "bigint")).order_by()
        )
        .values_list("handoff__workflow", "handoff__workspace_id")
        .annotate(n=Count("id"))
    )


def _failed(ids: list[int]) -> QuerySet:
    return (
        failed_attempts(Attempt.objects.filter(handoff_id__in=ValuesIn(ids, "bigint")).order_by())
        .values_list("handoff__workflow", "handoff__workspace_id", "failure_class")
        .annotate(n=Count("id"))
    )


def _interventions(ids: list[int]) -> QuerySet:
    return (
        interventions(
            HandoffEvent.objects.filter(handoff_id__in=ValuesIn(ids, "bigint")).order_by()
        )
        .values_list("handoff__workflow", "handoff__workspace_id")
        .annotate(n=Count("id"))
    )


# The counters whose rows retention deletes, and how a batch's rows count for each.
COUNTED_BY: dict[str, Callable[[list[int]], QuerySet]] = {
    COMPLETED: _completed,
    DUPLICATE_PREVENTIONS: _duplicates,
    FAILED_ATTEMPTS: _failed,
    MANUAL_INTERVENTIONS: _interventions,
}


def labels_of(workflow: str | None, workspace_id: int | None, label: str = "") -> Labels:
    """The label values as /metrics writes them."""
    return (workflow or "", "" if workspace_id is None else str(workspace_id), label or "")


def carry_over(handoff_ids: list[int]) -> None:
    """Add what these handoffs (about to leave the hot tables) count in each counter to its archived total.
    Runs in the caller's transaction: rolled back with the batch, and an increment, so two batches at once
    add up."""
    _add(
        (metric, *labels_of(*row[:-1]), row[-1])
        for metric, counted in COUNTED_BY.items()
        for row in counted(handoff_ids)
    )


def person_deleted_keep_interventions(sender, instance, **kwargs) -> None:
    """A user is about to be deleted (`pre_delete`, connected in `ReconciliationConfig.ready`, in the deletion's
    transaction): their events keep their rows but lose their person (`actor` set to null); marked first as a
    deleted person's (`HandoffEventQuerySet.person_deleted`), they stay in the interventions rule, so neither
    Health's count nor handoff_manual_interventions_total goes down, and nothing is carried (a user deleted
    before this release had theirs carried into the archived total, and their events are not marked)."""
    HandoffEvent.objects.person_deleted(instance.pk)


def _add(rows: Iterable[tuple]) -> None:
    rows = list(rows)
    if not rows:
        return
    with connection.cursor() as cursor:
        cursor.executemany(_increment_sql(), rows)


def _increment_sql() -> str:
    """An upsert that adds (both backends: PostgreSQL, and SQLite from 3.24)."""
    table = connection.ops.quote_name(ArchivedTotal._meta.db_table)
    return (
        f"INSERT INTO {table} (metric, workflow, workspace, label, n) "  # noqa: S608 (our own table's name)
        "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (metric, workflow, workspace, label) "
        f"DO UPDATE SET n = {table}.n + excluded.n"
    )


def archived_totals() -> dict[str, dict[Labels, int]]:
    """Per counter, the archived count of each label set. One query over a table of a few rows per label set."""
    totals: dict[str, dict[Labels, int]] = defaultdict(dict)
    for metric, workflow, workspace, label, n in ArchivedTotal.objects.values_list(
        "metric", "workflow", "workspace", "label", "n"
    ):
        totals[metric][(workflow, workspace, label)] = n
    return totals


def with_archived(live: Iterable[tuple], archived: dict[Labels, int]) -> list[tuple[Labels, int]]:
    """Live rows `(workflow, workspace_id[, label], n)` plus the archived counts of the same labels, and the
    archived label sets that have no live rows any more; sorted by labels."""
    merged: dict[Labels, int] = dict(archived)
    for *labels, n in live:
        key = labels_of(*labels)
        merged[key] = merged.get(key, 0) + n
    return sorted(merged.items())
