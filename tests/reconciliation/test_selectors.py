"""reconciliation/selectors.py: the reads behind findings, repairs, runs and the health figures.

The health summary as a whole is pinned in test_health.py; these check each read on its own."""

from datetime import timedelta

import pytest
from django.utils import timezone

from outbox.models import Attempt, AttemptOutcome, Handoff, HandoffEvent, HandoffState
from reconciliation import selectors
from reconciliation.models import FindingKind, FindingStatus, ManualRepair, RunStatus
from tests.factories import FindingFactory, HandoffFactory, ReconciliationRunFactory, make_workspace

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
S = HandoffState


def test_needing_person_is_needs_attention_uncertain_or_any_handoff_with_a_live_finding(db):
    make_workspace(7), make_workspace(8)
    attention, uncertain = (
        HandoffFactory(state=S.NEEDS_ATTENTION),
        HandoffFactory(state=S.UNCERTAIN),
    )
    with_finding = HandoffFactory(state=S.DELIVERED)
    FindingFactory(action_key=with_finding.action_key, status=FindingStatus.ACKNOWLEDGED)
    resolved = HandoffFactory(state=S.DELIVERED)
    FindingFactory(action_key=resolved.action_key, status=FindingStatus.RESOLVED)
    HandoffFactory(state=S.PENDING)
    assert set(selectors.needing_person(Handoff.objects.all())) == {
        attention,
        uncertain,
        with_finding,
    }
    # The header's count is the same set, counted in two indexed parts.
    assert selectors.needing_person_counts_bounded([7, 8]) == {7: 3}


def test_scoped_reads_take_none_for_every_workspace(db):
    HandoffFactory(workspace_id=7), HandoffFactory(workspace_id=8)
    assert selectors.handoffs_scoped(None).count() == 2
    assert selectors.handoffs_scoped([8]).count() == 1


def test_live_findings_of_a_key_leave_out_resolved_ones(db):
    live = FindingFactory(action_key="onboarding:7:1:1")
    FindingFactory(
        action_key="onboarding:7:1:1", kind=FindingKind.STUCK, status=FindingStatus.RESOLVED
    )
    assert list(selectors.live_findings_of("onboarding:7:1:1")) == [live]
    assert list(selectors.live_findings([8])) == []
    assert selectors.findings_by_kind([7]) == {
        kind: int(kind == live.kind) for kind in FindingKind.values
    }


def test_repairs_of_a_handoff_are_those_of_its_workspace_and_key_oldest_first(db):
    handoff = HandoffFactory()
    first = ManualRepair.objects.create(
        workspace_id=7,
        action_key=handoff.action_key,
        actor_label="olga",
        what_was_done="created by hand",
    )
    second = ManualRepair.objects.create(
        workspace_id=7, action_key=handoff.action_key, actor_label="olga", what_was_done="checked"
    )
    ManualRepair.objects.create(
        workspace_id=8, action_key=handoff.action_key, actor_label="x", what_was_done="-"
    )
    assert list(selectors.repairs_of(handoff)) == [first, second]


def test_list_links_carry_only_the_filters_given():
    assert selectors.handoff_list_url() == "/handoffs/"
    assert (
        selectors.handoff_list_url(state="pending", workspace=None, q="")
        == "/handoffs/?state=pending"
    )
    assert selectors.findings_url(kind="stuck", workspace=7).endswith("?kind=stuck&workspace=7")


def test_time_to_acknowledge_over_the_last_30_days_and_the_oldest_unacknowledged(db):
    now = timezone.now()
    for minutes, ack_after in ((10, 60), (20, 180), (40 * 24 * 60, 5)):
        since = now - timedelta(minutes=minutes)
        HandoffFactory(
            state=S.NEEDS_ATTENTION,
            attention_since=since,
            acknowledged_at=since + timedelta(seconds=ack_after),
        )
    oldest = now - timedelta(hours=2)
    HandoffFactory(state=S.NEEDS_ATTENTION, attention_since=oldest)
    ack = selectors.time_to_acknowledge([7], now=now)
    assert (ack.count, ack.median_seconds, ack.worst_seconds) == (2, 120.0, 180.0)
    assert (ack.unacknowledged, ack.oldest_unacknowledged) == (1, oldest)
    assert selectors.time_to_acknowledge([8], now=now).median_seconds is None


def test_failure_rates_per_workflow_and_rule_version_leave_observed_ones_out(db):
    HandoffFactory(
        rule_version="onboarding-v1", attention_since=timezone.now(), state=S.NEEDS_ATTENTION
    )
    HandoffFactory(rule_version="onboarding-v1", state=S.DELIVERED)
    HandoffFactory(rule_version="onboarding-v2", state=S.DELIVERED)
    HandoffFactory(rule_version="onboarding-v2", state=S.OBSERVED)
    assert selectors.failure_rates([7]) == [
        {
            "workflow": "onboarding",
            "rule_version": "onboarding-v1",
            "total": 2,
            "failed": 1,
            "rate": 0.5,
        },
        {
            "workflow": "onboarding",
            "rule_version": "onboarding-v2",
            "total": 1,
            "failed": 0,
            "rate": 0.0,
        },
    ]


def test_hourly_series_counts_deliveries_and_failed_attempts_per_hour(db):
    now = timezone.now()
    hour = now.replace(minute=0, second=0, microsecond=0)
    delivered = HandoffFactory(state=S.DELIVERED, delivered_at=hour)
    Attempt.objects.create(
        handoff=delivered,
        number=1,
        fencing_epoch=1,
        worker="w1",
        started_at=hour,
        outcome=AttemptOutcome.FAILED,
    )
    Attempt.objects.create(
        handoff=delivered,
        number=2,
        fencing_epoch=2,
        worker="w1",
        started_at=hour,
        outcome=AttemptOutcome.CREATED,
    )
    series = selectors.hourly_series([7], now=now)
    assert len(series) == 24
    assert series[-1] == {"hour": hour, "delivered": 1, "failed": 1}
    assert sum(row["delivered"] + row["failed"] for row in series[:-1]) == 0
    assert selectors.hourly_series([8], now=now)[-1]["delivered"] == 0


def test_last_run_is_the_newest_finished_run_covering_the_workspace_and_runs_visible_are_full_or_own(
    db,
):
    full = ReconciliationRunFactory()
    own = ReconciliationRunFactory(workspace_id=7)
    ReconciliationRunFactory(workspace_id=8)
    running = ReconciliationRunFactory(status=RunStatus.RUNNING)
    assert selectors.last_run() == full
    assert selectors.last_run(7) == own
    assert set(selectors.runs_visible_to([7])) == {full, own, running}


def test_duplicate_attempts_and_manual_interventions_are_scoped_and_newest_first(db):
    mine, theirs = HandoffFactory(), HandoffFactory(workspace_id=8)
    now = timezone.now()
    for handoff in (mine, theirs):
        Attempt.objects.create(
            handoff=handoff,
            number=1,
            fencing_epoch=1,
            worker="w1",
            started_at=now,
            outcome=AttemptOutcome.DUPLICATE,
        )
        HandoffEvent.objects.create(
            handoff=handoff, to_state=S.PENDING, actor_label="olga", action="retry"
        )
    HandoffEvent.objects.create(handoff=mine, to_state=S.IN_FLIGHT, actor_label="dispatcher")
    assert [a.handoff for a in selectors.duplicate_attempts([7])] == [mine]
    assert [(e.handoff, e.action) for e in selectors.manual_interventions([7])] == [(mine, "retry")]


def test_findings_without_a_workspace_are_visible_to_staff_only(db):
    mine, unscoped = FindingFactory(), FindingFactory(workspace_id=None)
    FindingFactory(workspace_id=8)
    assert list(selectors.findings_visible_to([7])) == [mine]
    assert set(selectors.findings_visible_to([7], include_unscoped=True)) == {mine, unscoped}


def test_needing_person_counts_bounded_stop_past_the_cap_per_workspace(db):
    make_workspace(7), make_workspace(8), make_workspace(9)
    HandoffFactory.create_batch(3, state=S.NEEDS_ATTENTION)
    HandoffFactory(state=S.UNCERTAIN)
    with_finding = HandoffFactory(state=S.DELIVERED)
    FindingFactory(action_key=with_finding.action_key)
    HandoffFactory(state=S.NEEDS_ATTENTION, workspace_id=8)
    HandoffFactory(state=S.PENDING, workspace_id=9)
    assert selectors.needing_person_counts_bounded([7, 8, 9]) == {7: 5, 8: 1}
    # Past the cap each part stops at cap + 1 rows, and the figure says "more than cap".
    assert selectors.needing_person_counts_bounded([7, 8], cap=2) == {7: 3, 8: 1}
    assert selectors.needing_person_counts_bounded([]) == {}


def test_a_count_past_the_cap_reads_999_plus():
    from console.templatetags.console_pages import bounded_count

    assert selectors.COUNT_CAP == 999
    assert [bounded_count(n) for n in (0, 999, 1000, None)] == [0, 999, "999+", None]
