"""Keyset paging of the console's long lists: never a COUNT(*) over a table."""

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from django.db import connections, transaction
from django.db.models import F, OrderBy, Q, QuerySet


def keyset_page(
    queryset: QuerySet,
    *,
    after: tuple | None,
    size: int,
    newest_first: bool = True,
    field: str = "created_at",
    merge_by: tuple[str, Sequence] | None = None,
    narrowed_first: bool = False,
) -> tuple[list, bool]:
    """One page ordered on (`field`, id), starting after the (`field`, id) cursor. The one keyset pager of
    the console's lists; its cursors are written by `lib.querystring.keyset_cursor`.

    `merge_by=(column, values)` names the leading column of the list's (column, `field`, id) index and the
    values the list covers (a person's workspaces). PostgreSQL reads `column IN (…) ORDER BY field, id` by
    fetching every row of those values and sorting them (about 1 s for an operator of several workspaces at
    10,000,000 handoffs); one ordered branch per value, each stopping after a page, merged by a UNION ALL,
    reads at most a page per value from the index (a Merge Append). Where a database cannot order and limit
    the branches of a UNION (SQLite), or there is one value, the plain query is used.

    `narrowed_first`: the rows are found through a filter's own index (a trigram search): the order puts
    NULLs where no btree index does (`field` is never NULL, so the rows are the same), so that PostgreSQL
    cannot walk an ordered index and filter row by row, which reads a whole workspace when matches are rare
    (its estimate of `LIKE '%…%'` comes from a sample); it finds the matches, then sorts them, planned
    without parallel workers (`planned_serially`).

    Returns the rows and whether another page follows. Fetches one row more than it shows and
    never counts the whole set.
    """
    direction, strict, bound = ("-", "lt", "lte") if newest_first else ("", "gt", "gte")
    order = (f"{direction}{field}", f"{direction}id")
    if narrowed_first:
        order = (narrowed_order(field, newest_first=newest_first), order[1])
    queryset = queryset.order_by(*order)
    if after is not None:
        # The plain bound lets the (workspace, field, id) index start at the cursor; the OR alone would
        # make PostgreSQL scan and filter every row before it.
        queryset = queryset.filter(
            Q(**{f"{field}__{bound}": after[0]}),
            Q(**{f"{field}__{strict}": after[0]}) | Q(**{f"id__{strict}": after[1]}),
        )
    if narrowed_first:
        with planned_serially(queryset.db):
            rows = list(_merged(queryset, merge_by, order, size + 1))
    else:
        rows = list(_merged(queryset, merge_by, order, size + 1))
    return rows[:size], len(rows) > size


@contextmanager
def planned_serially(using: str) -> Iterator[None]:
    """Queries planned without parallel workers on PostgreSQL, for a list sorted after its filter's own index
    found the rows (`narrowed_order`). A parallel plan can sort below a Gather Merge and stop a per-row join
    (the newest-revision anti-join) after a page, and a parallel scan of the whole table then looks cheaper
    than the index whenever ANALYZE's sample guesses a rare match common (1% for one client in 1,000). A
    serial plan only sorts the rows it found, so the index is chosen on the estimate of matches alone. The
    setting is put back after; it is transaction-local, so an error's rollback restores it too."""
    connection = connections[using]
    if connection.vendor != "postgresql":
        yield
        return
    with transaction.atomic(using=using), connection.cursor() as cursor:
        cursor.execute(
            "SELECT current_setting('max_parallel_workers_per_gather'), "
            "set_config('max_parallel_workers_per_gather', '0', true)"
        )
        (before, _) = cursor.fetchone()
        yield
        cursor.execute("SELECT set_config('max_parallel_workers_per_gather', %s, true)", [before])


def narrowed_order(field: str, *, newest_first: bool) -> OrderBy:
    """The order on `field` of rows found through a filter's own index (`keyset_page`'s `narrowed_first`):
    NULLs placed where no btree index has them (`field` is never NULL, so the rows are the same), so that
    PostgreSQL finds the matches, then sorts them, rather than walking an ordered index testing each row."""
    return F(field).desc(nulls_last=True) if newest_first else F(field).asc(nulls_first=True)


def _merged(queryset: QuerySet, merge_by: tuple[str, Sequence] | None, order, limit: int):
    """The first `limit` rows of `queryset` (ordered), read one branch per value of `merge_by` where the
    database can merge ordered branches."""
    if merge_by is None:
        return queryset[:limit]
    column, values = merge_by
    values = sorted(set(values))
    features = connections[queryset.db].features
    if len(values) < 2 or not features.supports_slicing_ordering_in_compound:
        return queryset[:limit]
    first, *rest = (queryset.filter(**{column: value})[:limit] for value in values)
    return first.union(*rest, all=True).order_by(*order)[:limit]
