"""The work read back: the task status the receiver reports for a delivered handoff, stored on it.

A run meets every key once; a status that differs from the stored one is kept and written one page
at a time (`handoffs_record_work_status`, the outbox's service), so memory stays bounded.
"""

from dataclasses import dataclass, field

from outbox.destinations import RemoteTask
from outbox.services import handoffs_record_work_status
from reconciliation.merge import SourceKey, SourceRow, reports_work


def work_status_changed(src: SourceKey | SourceRow | None, task: RemoteTask | None) -> bool:
    """The receiver's task speaks for this handoff's work and reports a status other than the stored one."""
    return (
        src is not None
        and reports_work(src.state, src.payload_hash, task)
        and task.status != src.work_status
    )


@dataclass
class WorkStatuses:
    """Work statuses the receiver reported that differ from the stored ones, written one page at a time."""

    batch_size: int
    pending: dict[str, str] = field(default_factory=dict)
    recorded: int = 0

    def note(self, key: str, src: SourceKey | SourceRow | None, task: RemoteTask | None) -> None:
        if not work_status_changed(src, task):
            return
        self.pending[key] = task.status
        if len(self.pending) >= self.batch_size:
            self.flush()

    def flush(self) -> None:
        if self.pending:
            self.recorded += handoffs_record_work_status(statuses=self.pending)
            self.pending = {}
