"""The audit export: read the kinds the exporter may see, render them, and record the export itself.

The export row is written in the same transaction as the read, so an export that fails leaves no record
and a recorded export is one that was produced. Reasons and subjects go through the one redaction function,
as everything shown is."""

import json
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from django.db import transaction

from approvals.errors import InvalidPayload
from approvals.models import AuditExport
from console.audit_trail.access import audit_kinds_for
from console.audit_trail.records import FIELDS, AuditRecord
from console.audit_trail.sources import SOURCES, Period
from lib.csv_cells import csv_line
from lib.databases import DB
from outbox.redaction import redact_text

MAX_PERIOD = timedelta(days=366)
MEDIA_TYPES = {AuditExport.Format.CSV: "text/csv", AuditExport.Format.JSONL: "application/jsonl"}


@dataclass(frozen=True)
class AuditExportResult:
    export: AuditExport
    records: list[AuditRecord]
    content: str

    @property
    def media_type(self) -> str:
        return MEDIA_TYPES[self.export.format]

    @property
    def filename(self) -> str:
        day = self.export.period_start.date().isoformat()
        return f"audit-workspace-{self.export.workspace_id}-{day}-{self.export.pk}.{self.export.format}"


def _check(*, start: datetime, end: datetime, fmt: str) -> None:
    reasons = []
    if fmt not in AuditExport.Format.values:
        reasons.append(f"format must be one of {', '.join(AuditExport.Format.values)}")
    if start.tzinfo is None or end.tzinfo is None:
        reasons.append("the period's times need a time zone")
    elif not start < end:
        reasons.append("the period must end after it starts")
    elif end - start > MAX_PERIOD:
        reasons.append("a period is at most 366 days: export a longer one in parts")
    if reasons:
        raise InvalidPayload(reasons)


def _redacted(record: AuditRecord) -> AuditRecord:
    return replace(record, reason=redact_text(record.reason), subject=redact_text(record.subject))


def audit_records(*, period: Period, kinds: list[str]) -> list[AuditRecord]:
    records = [r for kind in kinds for r in SOURCES[kind].read(period)]
    return sorted((_redacted(r) for r in records), key=lambda r: (r.at, r.kind, r.record))


def render_csv(records: list[AuditRecord]) -> str:
    rows = (r.as_row() for r in records)
    return csv_line(FIELDS) + "".join(csv_line(row[field] for field in FIELDS) for row in rows)


def render_jsonl(records: list[AuditRecord]) -> str:
    return "".join(json.dumps(r.as_row(), ensure_ascii=False) + "\n" for r in records)


def audit_export(
    *, actor, workspace_id: int, start: datetime, end: datetime, fmt: str, channel: str
) -> AuditExportResult:
    """The workspace's trail for [start, end) as the actor may see it, recorded as an export of its own."""
    _check(start=start, end=end, fmt=fmt)
    kinds = audit_kinds_for(actor, workspace_id)
    period = Period(workspace_id=workspace_id, start=start, end=end)
    with transaction.atomic(using=DB):
        records = audit_records(period=period, kinds=kinds)
        export = AuditExport.objects.create(
            workspace_id=workspace_id,
            exported_by=actor,
            period_start=start,
            period_end=end,
            format=fmt,
            channel=channel,
            kinds=kinds,
            event_count=len(records),
        )
    render = render_csv if fmt == AuditExport.Format.CSV else render_jsonl
    return AuditExportResult(export=export, records=records, content=render(records))
