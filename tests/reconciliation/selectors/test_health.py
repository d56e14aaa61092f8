"""reconciliation/selectors/health.py: the health dashboard, every figure against hand-computed values,
scoped to the operator's workspaces; then each read on its own."""

import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from outbox.models import Attempt, AttemptOutcome, Handoff, HandoffEvent, HandoffState
from reconciliation import selectors
from reconciliation.charts import bar_chart
from reconciliation.selectors.health import health_summary
from tests.factories import HandoffFactory
from tests.reconciliation.health_world import HEALTH_7, events_of_no_person_and_of_one

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
S = HandoffState


def test_figures_match_hand_computed_values(health_world):
    summary = health_summary([7], now=health_world["now"])
    figures = {name: f["value"] for name, f in summary["figures"].items()}
    for name, expected in HEALTH_7.items():
        assert figures[name] == expected, name
    assert figures["oldest_pending_seconds"] == pytest.approx(30 * 60, abs=5)
    assert figures["oldest_in_flight_seconds"] == pytest.approx(5 * 60, abs=5)
    # 10 handoffs of workflow onboarding, rule version onboarding-v1; 4 ever needed attention.
    assert summary["failure_rates"] == [
        {
            "workflow": "onboarding",
            "rule_version": "onboarding-v1",
            "total": 10,
            "failed": 4,
            "rate": 0.4,
            "link": "/handoffs/?state=needs_attention&q=onboarding%3A",
        },
    ]
    kinds = {f["kind"]: f["value"] for f in summary["findings"]}
    assert kinds["missing_at_receiver"] == 1
    assert summary["last_run"] == health_world["run"]


def test_every_figure_links_to_the_filtered_list_behind_it(health_world):
    figures = health_summary([7], now=health_world["now"], workspace=7)["figures"]
    assert figures["completed"]["link"] == "/handoffs/?state=delivered&workspace=7"
    assert figures["pending"]["link"] == "/handoffs/?state=pending&workspace=7"
    assert figures["uncertain"]["link"] == "/handoffs/?state=uncertain&workspace=7"
    assert (
        figures["retry_exhausted"]["link"] == "/handoffs/?reason_code=retries_exhausted&workspace=7"
    )
    assert figures["duplicate_preventions"]["link"] == "/health/duplicates/?workspace=7"
    assert figures["manual_interventions"]["link"] == "/health/interventions/?workspace=7"
    assert figures["outcome_validation_failures"]["link"] == (
        "/reconciliation/findings/?outcome_validation=1&workspace=7"
    )


def test_other_workspaces_do_not_count(health_world):
    both = {
        n: f["value"] for n, f in health_summary([7, 8], now=health_world["now"])["figures"].items()
    }
    assert both["completed"] == HEALTH_7["completed"] + 1
    assert both["retry_exhausted"] == HEALTH_7["retry_exhausted"] + 1
    only_8 = {
        n: f["value"] for n, f in health_summary([8], now=health_world["now"])["figures"].items()
    }
    assert (only_8["completed"], only_8["needs_attention"], only_8["duplicate_preventions"]) == (
        1,
        1,
        0,
    )


def test_deliveries_and_failures_per_hour_over_24_hours(health_world):
    now = health_world["now"]
    handoffs = health_world["handoffs"]
    # The series is bucketed by the hour of `now`, taken before the world was built: the delivery and the
    # failed attempt, stamped a moment later, fell into the next hour whenever the build straddled the hour.
    Handoff.objects.filter(pk=handoffs["delivered"].pk).update(delivered_at=now)
    Attempt.objects.filter(handoff=handoffs["rejected"]).update(started_at=now)
    Handoff.objects.filter(pk=handoffs["duplicate"].pk).update(
        delivered_at=now - timedelta(hours=3)
    )
    series = health_summary([7], now=now)["series"]
    assert len(series) == 24
    assert [p["delivered"] for p in series][-1] == 1 and series[-4]["delivered"] == 1
    assert sum(p["delivered"] for p in series) == 2
    # The one real failed attempt: the receiver rejected handoff 7's payload.
    assert sum(p["failed"] for p in series) == 1 and series[-1]["failed"] == 1
    chart = bar_chart(series, "delivered", height=90)
    assert chart.total == 2 and chart.peak == 1
    assert chart.bars[-1].height == 88 and chart.bars[0].height == 0


def test_dashboard_page_shows_the_figures_with_links(client, health_world):
    client.force_login(health_world["olga"])
    response = client.get(reverse("reconciliation:health"))
    assert response.status_code == 200
    html = response.content.decode()
    # Each count's words, inside its claim (console/claims.py).
    completed = r'id="fig-completed"><a href="/handoffs/\?state=delivered"><span [^>]*>2</span></a>'
    assert re.search(completed, html)
    exhausted = r'<a href="/handoffs/\?reason_code=retries_exhausted"><span [^>]*>1</span></a>'
    assert re.search(exhausted, html)
    assert "3 min" in html  # median time to acknowledgement
    assert "5 min" in html  # worst
    assert "<svg" in html and "<rect" in html
    assert "40.0%" in html


def test_dashboard_is_for_operators_and_their_workspaces_only(client, health_world):
    client.force_login(health_world["alice"])  # approver, not operator
    assert client.get(reverse("reconciliation:health")).status_code == 403
    client.force_login(health_world["olga"])
    assert client.get(reverse("reconciliation:health") + "?workspace=8").status_code == 404


def test_drilldowns_list_the_rows_behind_the_numbers(client, health_world):
    client.force_login(health_world["olga"])
    html = client.get(reverse("reconciliation:drilldown", args=["interventions"])).content.decode()
    assert html.count("onboarding:7:7:1") == 2 and "acknowledge" in html and "assign" in html
    html = client.get(reverse("reconciliation:drilldown", args=["duplicates"])).content.decode()
    assert "onboarding:7:2:1" in html and "onboarding:8:" not in html


def test_dashboard_and_findings_pages_run_a_fixed_number_of_queries(
    client, health_world, django_assert_max_num_queries
):
    client.force_login(health_world["olga"])
    # 19: the paused destinations are one more query, whatever the number of rows; the nav's roles another.
    # 21: the destinations' limits and holds, and their slots in use, are two more, whatever their number.
    # 23: whether the user may set limits (`has_perm`: the user's own permissions, then their groups').
    # +3 on each page: the header's nav (workspace names, and what waits for an operator there), drawn on
    # every console page by one context processor since it stopped being each view's own call.
    # 30: the incidents' figures (live by severity, rejected triggers with their owners, notifications
    # that failed, alerts given up) are four more, whatever the number of incidents.
    # 31: the database's now, read once, so that ages are measured on the clock the stored times were written by.
    # 32: the alert channels' delivery (the product's notifications, counted apart), one query.
    with django_assert_max_num_queries(32):
        assert client.get(reverse("reconciliation:health")).status_code == 200
    with django_assert_max_num_queries(9):
        assert client.get(reverse("reconciliation:findings")).status_code == 200


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


def test_duplicate_attempts_and_manual_interventions_are_scoped_and_newest_first(world):
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
            handoff=handoff,
            to_state=S.PENDING,
            actor=world["olga"],
            actor_label="olga",
            action="retry",
        )
    HandoffEvent.objects.create(handoff=mine, to_state=S.IN_FLIGHT, actor_label="dispatcher")
    assert [a.handoff for a in selectors.duplicate_attempts([7])] == [mine]
    assert [(e.handoff, e.action) for e in selectors.manual_interventions([7])] == [(mine, "retry")]


def test_manual_interventions_are_a_persons_actions_not_a_receivers_or_a_sweeps(world):
    """Fails on the rule that counted every event with an action: a receiver's status event (action
    `receiver_event`) and the sweep's end of a hold whose end passed (action `resume`, by no one) were
    counted on Health, its drill-down and /metrics as operators' actions."""
    held = events_of_no_person_and_of_one(world)
    actions = set(HandoffEvent.objects.exclude(action="").values_list("action", flat=True))
    assert actions == {"receiver_event", "hold", "resume"}

    assert [(e.handoff, e.action) for e in selectors.manual_interventions([7])] == [(held, "hold")]
    assert health_summary([7])["figures"]["manual_interventions"]["value"] == 1
    assert health_summary([8])["figures"]["manual_interventions"]["value"] == 0
