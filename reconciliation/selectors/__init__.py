"""Reconciliation's reads, by subject: who needs a person (`needing_person`), findings and runs
(`findings`), the health dashboard (`health`, counting with the rules in `figures`), the destinations
on it (`destinations`), a handoff's business outcome (`work_outcome`), and the links to the lists
behind a figure (`links`). The public names are re-exported here for the screens."""

from reconciliation.selectors.destinations import (
    DestinationOverview,
    destination_names,
    destinations_overview,
    paused_by_breaker,
)
from reconciliation.selectors.figures import ACK_SAMPLE_CAP, ACK_WINDOW, FAILED_OUTCOMES
from reconciliation.selectors.findings import (
    findings_by_kind,
    findings_filtered,
    findings_visible_to,
    last_run,
    live_findings,
    live_findings_of,
    repairs_of,
    runs_visible_to,
)
from reconciliation.selectors.health import (
    AckTimes,
    duplicate_attempts,
    failure_rates,
    health_summary,
    health_summary_shared,
    hourly_series,
    manual_interventions,
    time_to_acknowledge,
)
from reconciliation.selectors.links import findings_url, handoff_list_url
from reconciliation.selectors.needing_person import (
    COUNT_CAP,
    NEEDS_PERSON_FILTER,
    has_live_finding,
    needing_person,
    needing_person_condition,
    needing_person_counts_bounded,
)
from reconciliation.selectors.scope import handoffs_scoped
from reconciliation.selectors.work_outcome import OwnerAnswer, WorkOutcome, work_outcome

__all__ = [
    "ACK_SAMPLE_CAP",
    "ACK_WINDOW",
    "COUNT_CAP",
    "FAILED_OUTCOMES",
    "NEEDS_PERSON_FILTER",
    "AckTimes",
    "DestinationOverview",
    "OwnerAnswer",
    "WorkOutcome",
    "destination_names",
    "destinations_overview",
    "duplicate_attempts",
    "failure_rates",
    "findings_by_kind",
    "findings_filtered",
    "findings_url",
    "findings_visible_to",
    "handoff_list_url",
    "handoffs_scoped",
    "has_live_finding",
    "health_summary",
    "health_summary_shared",
    "hourly_series",
    "last_run",
    "live_findings",
    "live_findings_of",
    "manual_interventions",
    "needing_person",
    "needing_person_condition",
    "needing_person_counts_bounded",
    "paused_by_breaker",
    "repairs_of",
    "runs_visible_to",
    "time_to_acknowledge",
    "work_outcome",
]
