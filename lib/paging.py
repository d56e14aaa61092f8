"""Keyset paging of the console's long lists: never a COUNT(*) over a table."""

from django.db.models import Q, QuerySet


def keyset_page(
    queryset: QuerySet,
    *,
    after: tuple | None,
    size: int,
    newest_first: bool = True,
    field: str = "created_at",
) -> tuple[list, bool]:
    """One page ordered on (`field`, id), starting after the (`field`, id) cursor. The one keyset pager of
    the console's lists; its cursors are written by `lib.querystring.keyset_cursor`.

    Returns the rows and whether another page follows. Fetches one row more than it shows and
    never counts the whole set.
    """
    direction, strict, bound = ("-", "lt", "lte") if newest_first else ("", "gt", "gte")
    queryset = queryset.order_by(f"{direction}{field}", f"{direction}id")
    if after is not None:
        # The plain bound lets the (workspace, field, id) index start at the cursor; the OR alone would
        # make PostgreSQL scan and filter every row before it.
        queryset = queryset.filter(
            Q(**{f"{field}__{bound}": after[0]}),
            Q(**{f"{field}__{strict}": after[0]}) | Q(**{f"id__{strict}": after[1]}),
        )
    rows = list(queryset[: size + 1])
    return rows[:size], len(rows) > size
