"""The health figures for Prometheus, computed from the database at scrape time.

A custom collector runs a fixed, small set of GROUP BY queries per scrape (by state, workflow,
workspace, failure class); nothing is kept in process memory, so every web process reports the
same numbers. Names and labels are stable: dashboards and alert rules depend on them.

Counters (`*_total`) are counts of rows that only grow (attempts, events); gauges are states now.
"""

import statistics
from collections import defaultdict

from django.db.models import Count, Min
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from outbox.clock import db_time
from outbox.models import Attempt, DestinationHold, Handoff, HandoffEvent, HandoffState
from outbox.models.handoffs import completing_case_condition, work_failed_condition
from reconciliation.metric_totals import (
    COMPLETED,
    DUPLICATE_PREVENTIONS,
    FAILED_ATTEMPTS,
    INTERVENTIONS_EARLIER_RULE,
    MANUAL_INTERVENTIONS,
    archived_totals,
    with_archived,
)
from reconciliation.selectors.figures import (
    ACK_SAMPLE_CAP,
    ack_seconds,
    acknowledged_recently,
    duplicate_preventions,
    failed_attempts,
    failure_counts,
    failure_rate_base,
    interventions,
    rate,
    retries_exhausted,
)
from reconciliation.selectors.findings import last_run, live_findings
from reconciliation.selectors.needing_person import needing_person_condition

S = HandoffState
WF_WS = ["workflow", "workspace"]


def _labels(workflow: str, workspace_id: int | None, *rest: str) -> list[str]:
    return [workflow or "", "" if workspace_id is None else str(workspace_id), *rest]


def _add_counts(family, rows):
    """Rows are (workflow, workspace_id, *further labels, value): one metric each."""
    for *labels, value in rows:
        family.add_metric(_labels(*labels), value)
    return family


def _add_carried(family, rows, archived, *, labelled: bool = False):
    """A counter: the hot rows' counts `(workflow, workspace_id[, label], n)` plus the archived ones; `labelled`
    when the family has the further label."""
    for (workflow, workspace, label), value in with_archived(rows, archived):
        family.add_metric(
            [workflow, workspace, label] if labelled else [workflow, workspace], value
        )
    return family


def _state_families():
    """The families of `_by_state`: states, steps delivered, failed work, completed cases, needing a person,
    delivered by reason."""
    states = GaugeMetricFamily(
        "handoff_handoffs", "Handoffs by state now.", labels=[*WF_WS, "state"]
    )
    completed = CounterMetricFamily(
        "handoff_completed",
        "Steps delivered: the task exists at the receiver (its work may be open or failed; completed "
        "cases are handoff_cases_completed).",
        labels=WF_WS,
    )
    work_failed = GaugeMetricFamily(
        "handoff_work_failed",
        "Delivered steps kept now whose work the receiver reports failed.",
        labels=WF_WS,
    )
    cases = GaugeMetricFamily(
        "handoff_cases_completed",
        "Cases kept now that are complete: every step of the request delivered and its work reported done.",
        labels=WF_WS,
    )
    person = GaugeMetricFamily(
        "handoff_needing_person",
        "Handoffs that need a person: needs attention, uncertain, or with an open finding "
        "(the rule of the console's header, list filter and health page).",
        labels=WF_WS,
    )
    how = GaugeMetricFamily(
        "handoff_delivered_by_reason",
        "Delivered handoffs kept now, by how the outcome became known (reason code: created, "
        "duplicate_prevented, settled_by_lookup, settled_by_replay, settled_by_hand; empty before codes "
        "were recorded).",
        labels=[*WF_WS, "reason_code"],
    )
    return states, completed, work_failed, cases, person, how


class HandoffCollector(Collector):
    def collect(self):
        now = db_time()  # ages against the stored times' own clock
        handoffs = Handoff.objects.order_by()
        # Counters count the hot rows plus those retention moved out (never down when rows leave).
        archived = archived_totals()
        yield from self._by_state(handoffs, archived[COMPLETED])
        yield self._needs_attention(handoffs)
        yield self._oldest_age(handoffs, now)
        yield self._oldest_due_age(now)
        yield self._retries_exhausted(handoffs)
        attempts = Attempt.objects.order_by()
        yield self._duplicate_preventions(attempts, archived[DUPLICATE_PREVENTIONS])
        yield self._failed_attempts(attempts, archived[FAILED_ATTEMPTS])
        yield self._manual_interventions(
            archived[MANUAL_INTERVENTIONS], archived[INTERVENTIONS_EARLIER_RULE]
        )
        yield self._failure_ratio(handoffs)
        yield from self._acknowledgement(handoffs, now)
        yield from self._reconciliation()

    def _by_state(self, handoffs, archived_completed):
        states, completed, work_failed, cases, person, how = _state_families()
        per_person: dict[tuple, int] = defaultdict(int)
        per_state: dict[tuple, int] = defaultdict(int)
        per_outcome: dict[tuple, list[int]] = defaultdict(lambda: [0, 0])
        # One GROUP BY for six families: the needs-a-person count, failed work and completed cases ride along
        # as filtered counts, and the reason code splits the rows only as far as the delivered ones need it.
        for workflow, ws, state, code, n, needing, failed, completing in handoffs.values_list(
            "workflow", "workspace_id", "state", "reason_code"
        ).annotate(
            n=Count("id"),
            needing=Count("id", filter=needing_person_condition()),
            failed=Count("id", filter=work_failed_condition()),
            completing=Count("id", filter=completing_case_condition()),
        ):
            per_state[(workflow, ws, state)] += n
            per_person[(workflow, ws)] += needing
            if state == S.DELIVERED:
                how.add_metric(_labels(workflow, ws, code), n)
                per_outcome[(workflow, ws)][0] += failed
                per_outcome[(workflow, ws)][1] += completing
        delivered = []
        for (workflow, ws, state), n in sorted(per_state.items()):
            states.add_metric(_labels(workflow, ws, state), n)
            if state == S.DELIVERED:
                delivered.append((workflow, ws, n))
        _add_carried(completed, delivered, archived_completed)
        for (workflow, ws), n in sorted(per_person.items()):
            person.add_metric(_labels(workflow, ws), n)
        for (workflow, ws), (failed, completing) in sorted(per_outcome.items()):
            work_failed.add_metric(_labels(workflow, ws), failed)
            cases.add_metric(_labels(workflow, ws), completing)
        yield states
        yield completed
        yield work_failed
        yield cases
        yield person
        yield how

    def _needs_attention(self, handoffs):
        attention = GaugeMetricFamily(
            "handoff_needs_attention",
            "Handoffs that need a person, by failure class.",
            labels=[*WF_WS, "failure_class"],
        )
        return _add_counts(
            attention,
            handoffs.filter(state=S.NEEDS_ATTENTION)
            .values_list("workflow", "workspace_id", "failure_class")
            .annotate(n=Count("id")),
        )

    def _oldest_age(self, handoffs, now):
        oldest = GaugeMetricFamily(
            "handoff_oldest_age_seconds",
            "Age of the oldest pending (since recorded) or in-flight (since claimed) handoff.",
            labels=[*WF_WS, "state"],
        )
        for state, field in ((S.PENDING, "created_at"), (S.IN_FLIGHT, "updated_at")):
            for workflow, ws, first in (
                handoffs.filter(state=state)
                .values_list("workflow", "workspace_id")
                .annotate(first=Min(field))
            ):
                oldest.add_metric(
                    _labels(workflow, ws, state), max((now - first).total_seconds(), 0.0)
                )
        return oldest

    def _oldest_due_age(self, now):
        """The backlog's age by the backlog incident's own rule, read by the HandoffPendingTooLong rule: the
        handoffs of `HandoffQuerySet.backlog` (due; none of a destination an intended hold holds now, nor of
        an alert channel's), each destination's oldest due time counted from the end of its last intended
        hold if that is later (`DestinationHold.objects.backlog_since`). The rule is the outbox's, read by
        `incidents/causes.py` too. Two queries, whatever the number of destinations."""
        due = GaugeMetricFamily(
            "handoff_oldest_due_age_seconds",
            "Age of the oldest due pending handoff of a destination no intended hold (operator pause, "
            "maintenance window, Retry-After) holds now, counted from the later of its due time and the "
            "end of the destination's last intended hold (the backlog incident's rule).",
            labels=WF_WS,
        )
        rows = list(
            Handoff.objects.backlog()
            .order_by()
            .values_list("workflow", "workspace_id", "destination")
            .annotate(first=Min("next_attempt_at"))
        )
        since = DestinationHold.objects.backlog_since(
            ((destination, first) for _, _, destination, first in rows), now=now
        )
        oldest: dict[tuple, float] = {}
        for (workflow, ws, _, _), start in zip(rows, since, strict=True):
            age = max((now - start).total_seconds(), 0.0)
            oldest[(workflow, ws)] = max(age, oldest.get((workflow, ws), 0.0))
        for (workflow, ws), age in sorted(oldest.items()):
            due.add_metric(_labels(workflow, ws), age)
        return due

    def _retries_exhausted(self, handoffs):
        exhausted = GaugeMetricFamily(
            "handoff_retries_exhausted", "Handoffs whose automatic retries ran out.", labels=WF_WS
        )
        return _add_counts(
            exhausted,
            retries_exhausted(handoffs)
            .values_list("workflow", "workspace_id")
            .annotate(n=Count("id")),
        )

    def _duplicate_preventions(self, attempts, archived):
        duplicates = CounterMetricFamily(
            "handoff_duplicate_effect_preventions",
            "Attempts answered with the existing task: a second effect prevented.",
            labels=WF_WS,
        )
        return _add_carried(
            duplicates,
            duplicate_preventions(attempts)
            .values_list("handoff__workflow", "handoff__workspace_id")
            .annotate(n=Count("id")),
            archived,
        )

    def _failed_attempts(self, attempts, archived):
        failures = CounterMetricFamily(
            "handoff_failed_attempts",
            "Attempts that failed or ended with no known outcome.",
            labels=[*WF_WS, "failure_class"],
        )
        return _add_carried(
            failures,
            failed_attempts(attempts)
            .values_list("handoff__workflow", "handoff__workspace_id", "failure_class")
            .annotate(n=Count("id")),
            archived,
            labelled=True,
        )

    def _manual_interventions(self, archived, earlier_rule):
        manual = CounterMetricFamily(
            "handoff_manual_interventions",
            "Operator actions on handoffs (retry, cancel, correct, assign, acknowledge...).",
            labels=WF_WS,
        )
        carried = dict(archived)
        for key, n in earlier_rule.items():
            carried[key] = carried.get(key, 0) + n
        return _add_carried(
            manual,
            interventions(HandoffEvent.objects.order_by())
            .values_list("handoff__workflow", "handoff__workspace_id")
            .annotate(n=Count("id")),
            carried,
        )

    def _failure_ratio(self, handoffs):
        ratio = GaugeMetricFamily(
            "handoff_failure_ratio",
            "Share of handoffs that ever needed attention, by workflow and rule version.",
            labels=[*WF_WS, "rule_version"],
        )
        for workflow, ws, version, total, failed in (
            failure_rate_base(handoffs)
            .values_list("workflow", "workspace_id", "rule_version")
            .annotate(**failure_counts())
        ):
            ratio.add_metric(_labels(workflow, ws, version), rate(failed, total))
        return ratio

    def _acknowledgement(self, handoffs, now):
        samples: dict[tuple, list[float]] = defaultdict(list)
        for workflow, ws, failed, ack in acknowledged_recently(handoffs, now=now).values_list(
            "workflow", "workspace_id", "attention_since", "acknowledged_at"
        )[:ACK_SAMPLE_CAP]:
            samples[(workflow, ws)].append(ack_seconds(failed, ack))
        median = GaugeMetricFamily(
            "handoff_time_to_acknowledge_median_seconds",
            "Median time from needs_attention to acknowledgement (last 30 days).",
            labels=WF_WS,
        )
        worst = GaugeMetricFamily(
            "handoff_time_to_acknowledge_max_seconds",
            "Worst time from needs_attention to acknowledgement (last 30 days).",
            labels=WF_WS,
        )
        for (workflow, ws), values in sorted(
            samples.items(), key=lambda item: (item[0][0], item[0][1])
        ):
            median.add_metric(_labels(workflow, ws), statistics.median(values))
            worst.add_metric(_labels(workflow, ws), max(values))
        yield median
        yield worst

    def _reconciliation(self):
        findings = GaugeMetricFamily(
            "handoff_reconciliation_findings",
            "Open reconciliation findings by kind.",
            labels=[*WF_WS, "kind"],
        )
        validation = GaugeMetricFamily(
            "handoff_outcome_validation_failures",
            "Delivered handoffs whose receiver task does not prove the outcome.",
            labels=WF_WS,
        )
        per_validation: dict[tuple, int] = defaultdict(int)
        for workflow, ws, kind, is_validation, n in (
            live_findings(None)
            .order_by()
            .values_list("workflow", "workspace_id", "kind", "outcome_validation")
            .annotate(n=Count("id"))
        ):
            findings.add_metric(_labels(workflow, ws, kind), n)
            if is_validation:
                per_validation[(workflow, ws)] += n
        for (workflow, ws), n in per_validation.items():
            validation.add_metric(_labels(workflow, ws), n)
        yield findings
        yield validation

        run = last_run()
        last_finished = GaugeMetricFamily(
            "handoff_reconciliation_last_run_timestamp_seconds",
            "When the last reconciliation run finished (Unix time).",
            labels=["status"],
        )
        compared = GaugeMetricFamily(
            "handoff_reconciliation_last_run_keys_compared",
            "Keys compared by the last reconciliation run.",
        )
        if run is not None and run.finished_at is not None:
            last_finished.add_metric([run.status], run.finished_at.timestamp())
            compared.add_metric([], run.keys_compared)
        yield last_finished
        yield compared
