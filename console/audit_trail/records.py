"""One line of the audit trail, whatever table it comes from."""

from dataclasses import asdict, dataclass
from datetime import datetime

FIELDS = (
    "at",
    "kind",
    "record",
    "workspace",
    "actor",
    "action",
    "subject",
    "before",
    "after",
    "reason",
)


@dataclass(frozen=True)
class AuditRecord:
    at: datetime
    kind: str
    record: str  # "<kind>:<id>", stable across exports
    workspace: int | None  # None: applies to every workspace (a destination, a workflow's mode)
    actor: str
    action: str
    subject: str
    before: str
    after: str
    reason: str

    def as_row(self) -> dict:
        row = asdict(self)
        row["at"] = self.at.isoformat()
        return row
