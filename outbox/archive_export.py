"""What the archive holds, for one workspace and a time range, as CSV or JSON lines (`manage.py
export_archive`, docs/operations.md "Retention"). Streams in keyset pages of the archive's
(workspace_id, archived_at, handoff_id) index; the history's texts go through the one redaction function."""

import json
from collections.abc import Iterator
from datetime import datetime
from typing import TextIO

from django.db.models import Q

from lib.csv_cells import csv_line
from outbox.models import ArchivedHandoff
from outbox.redaction import redact

FORMATS = ("csv", "jsonl")
PAGE = 1000
# The flat columns of the CSV (the history is its last column, as JSON).
COLUMNS = (
    "handoff_id",
    "workspace_id",
    "action_key",
    "workflow",
    "step",
    "source_ref",
    "destination",
    "final_state",
    "task_id",
    "payload_hash",
    "work_status",
    "attempts",
    "created_at",
    "settled_at",
    "delivered_at",
    "archived_at",
)
# The JSON documents after them, redacted: the receipt, the request the handoff sent (null where its step
# mapped none: the payload went as it is), the history.
DOCUMENTS = ("receipt", "request", "history")


def archived_rows(
    *, workspace_id: int, since: datetime | None = None, until: datetime | None = None
) -> Iterator[dict]:
    """The workspace's archive rows archived in [since, until), oldest first, each a plain dict."""
    query = ArchivedHandoff.objects.filter(workspace_id=workspace_id)
    if since is not None:
        query = query.filter(archived_at__gte=since)
    if until is not None:
        query = query.filter(archived_at__lt=until)
    after = None
    while True:
        page = query.order_by("archived_at", "handoff_id")
        if after is not None:
            page = page.filter(
                Q(archived_at__gt=after[0]) | Q(archived_at=after[0], handoff_id__gt=after[1])
            )
        rows = list(page.values(*COLUMNS, *DOCUMENTS)[:PAGE])
        if not rows:
            return
        for row in rows:
            row["receipt"] = redact(row["receipt"])
            row["request"] = redact(row["request"]) if row["request"] is not None else None
            row["history"] = redact(row["history"])
            yield row
        after = (rows[-1]["archived_at"], rows[-1]["handoff_id"])


def _text(value) -> str:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return "" if value is None else str(value)


def archive_export(
    out: TextIO,
    *,
    workspace_id: int,
    fmt: str,
    since: datetime | None = None,
    until: datetime | None = None,
) -> int:
    """Write the rows to `out` in `fmt` (csv or jsonl); returns how many were written."""
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}")
    rows = archived_rows(workspace_id=workspace_id, since=since, until=until)
    count = 0
    if fmt == "csv":
        out.write(csv_line([*COLUMNS, *DOCUMENTS]))
        for row in rows:
            out.write(csv_line(_text(row[c]) for c in (*COLUMNS, *DOCUMENTS)))
            count += 1
        return count
    for row in rows:
        flat = {c: row[c] if isinstance(row[c], int) else _text(row[c]) for c in COLUMNS}
        line = {**flat, **{name: row[name] for name in DOCUMENTS}}
        out.write(json.dumps(line, sort_keys=True) + "\n")
        count += 1
    return count
