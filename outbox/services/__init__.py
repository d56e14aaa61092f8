"""Every write to a handoff, one module per sub-domain:

- `transitions`: the row lock and the checked move with its event (every other module writes through it);
- `recording`: the outbox row of an approved action; `workflows`: a workflow's later steps, recorded when
  the step before is delivered; `compensation`: reversing an instance;
- `outcomes`: the fenced record of an answer (the dispatcher's claims and leases are `outbox/dispatch/`,
  settling an unknown outcome by asking the receiver is `outbox/settlement/`; their names callers use are
  re-exported here: `handoff_claim_due`, `handoff_expire_leases`, `handoff_settle` …);
- `operator`: a person's actions on one handoff; `bulk`: one action over many; `work_status`: the
  receiver's task status read back.

What an answer means is decided in `outbox/outcomes.py`, what a workflow does in `outbox/steps.py`; these
modules write. The names callers use are re-exported here (`from outbox.services import handoff_record`).
"""

from outbox.dispatch.claims import Claim, ClaimedRow, handoff_claim_due
from outbox.dispatch.leases import (
    handoff_expire_leases,
    handoff_release_claims,
    handoff_renew_leases,
)
from outbox.services.bulk import (
    BULK_ACTIONS,
    BULK_INLINE_LIMIT,
    BULK_JOB_LIMIT,
    BulkConfirmed,
    BulkPreview,
    BulkResult,
    bulk_job_run,
    bulk_job_start,
    bulk_jobs_resume,
    handoffs_bulk_apply,
    handoffs_bulk_confirm,
    handoffs_bulk_preview,
)
from outbox.services.compensation import (
    handoff_residual_repaired,
    instance_cancel,
    instance_compensate,
    instance_compensation_plan,
)
from outbox.services.operator import (
    handoff_acknowledge,
    handoff_assign,
    handoff_cancel,
    handoff_note_check,
    handoff_retry,
    handoff_settle_manually,
)
from outbox.services.outcomes import Recorded, handoff_record_outcome, handoff_record_outcomes
from outbox.services.recording import handoff_record
from outbox.services.transitions import handoff_lock, handoff_transition
from outbox.services.work_status import WORK_STATUSES, handoffs_record_work_status
from outbox.settlement.asked import PERSON_LOOKUP_WAIT_SECONDS, handoff_settle

__all__ = [
    "BULK_ACTIONS",
    "BULK_INLINE_LIMIT",
    "BULK_JOB_LIMIT",
    "PERSON_LOOKUP_WAIT_SECONDS",
    "WORK_STATUSES",
    "BulkConfirmed",
    "BulkPreview",
    "BulkResult",
    "Claim",
    "ClaimedRow",
    "Recorded",
    "bulk_job_run",
    "bulk_job_start",
    "bulk_jobs_resume",
    "handoff_acknowledge",
    "handoff_assign",
    "handoff_cancel",
    "handoff_claim_due",
    "handoff_expire_leases",
    "handoff_lock",
    "handoff_note_check",
    "handoff_record",
    "handoff_record_outcome",
    "handoff_record_outcomes",
    "handoff_release_claims",
    "handoff_renew_leases",
    "handoff_residual_repaired",
    "handoff_retry",
    "handoff_settle",
    "handoff_settle_manually",
    "handoff_transition",
    "handoffs_bulk_apply",
    "handoffs_bulk_confirm",
    "handoffs_bulk_preview",
    "handoffs_record_work_status",
    "instance_cancel",
    "instance_compensate",
    "instance_compensation_plan",
]
