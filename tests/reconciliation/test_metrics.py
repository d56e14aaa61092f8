"""/metrics: token-protected, parsed with prometheus_client's parser, values checked against the database."""

from datetime import timedelta

import pytest
from django.db.models import Count
from django.urls import reverse
from prometheus_client.parser import text_string_to_metric_families

from incidents.models import AlertChannel, Incident, Notification, NotificationState
from outbox.clock import db_time
from outbox.models import Attempt, DestinationHold, Handoff, HoldKind
from outbox.models.handoffs import CHANNEL_DESTINATION_PREFIX, NOTIFICATION_WORKFLOW
from reconciliation.models import Finding

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
AUTH = {"HTTP_AUTHORIZATION": "Bearer metrics-test-token"}


def scrape(client) -> dict[tuple[str, tuple], float]:
    response = client.get(reverse("reconciliation:metrics"), **AUTH)
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=")
    samples = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def labels(**kw) -> tuple:
    return tuple(sorted(kw.items()))


def test_metrics_need_the_bearer_token(client, settings):
    url = reverse("reconciliation:metrics")
    assert client.get(url).status_code == 401
    assert client.get(url, HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
    assert client.get(url, HTTP_AUTHORIZATION="metrics-test-token").status_code == 401
    assert client.get(url).headers["WWW-Authenticate"].startswith("Bearer")
    settings.METRICS_TOKEN = ""
    refused = client.get(url, HTTP_AUTHORIZATION="Bearer ")
    assert refused.status_code == 503 and b"METRICS_TOKEN" in refused.content


def test_metric_values_equal_the_database(client, health_world):
    samples = scrape(client)
    by_state = Handoff.objects.values_list("workflow", "workspace_id", "state").annotate(
        n=Count("id")
    )
    for workflow, ws, state, n in by_state:
        assert (
            samples[("handoff_handoffs", labels(workflow=workflow, workspace=str(ws), state=state))]
            == n
        )
    assert (
        samples[("handoff_completed_total", labels(workflow="onboarding", workspace="7"))]
        == Handoff.objects.filter(workspace_id=7, state="delivered").count()
        == 2
    )
    assert (
        samples[
            (
                "handoff_needs_attention",
                labels(workflow="onboarding", workspace="7", failure_class="credential"),
            )
        ]
        == 1
    )
    assert samples[("handoff_retries_exhausted", labels(workflow="onboarding", workspace="8"))] == 1
    assert (
        samples[
            (
                "handoff_duplicate_effect_preventions_total",
                labels(workflow="onboarding", workspace="7"),
            )
        ]
        == Attempt.objects.filter(outcome="duplicate", handoff__workspace_id=7).count()
        == 1
    )
    assert (
        samples[
            (
                "handoff_failed_attempts_total",
                labels(workflow="onboarding", workspace="7", failure_class="permanent"),
            )
        ]
        == 1
    )
    assert (
        samples[
            ("handoff_manual_interventions_total", labels(workflow="onboarding", workspace="7"))
        ]
        == 2
    )
    assert samples[
        (
            "handoff_failure_ratio",
            labels(workflow="onboarding", workspace="7", rule_version="onboarding-v1"),
        )
    ] == pytest.approx(0.4)
    assert samples[
        ("handoff_time_to_acknowledge_median_seconds", labels(workflow="onboarding", workspace="7"))
    ] == pytest.approx(180)
    assert samples[
        ("handoff_time_to_acknowledge_max_seconds", labels(workflow="onboarding", workspace="7"))
    ] == pytest.approx(300)
    assert samples[
        (
            "handoff_oldest_age_seconds",
            labels(workflow="onboarding", workspace="7", state="pending"),
        )
    ] == pytest.approx(30 * 60, abs=30)
    assert (
        samples[
            (
                "handoff_reconciliation_findings",
                labels(workflow="onboarding", workspace="7", kind="missing_at_receiver"),
            )
        ]
        == 1
    )
    assert (
        samples[
            ("handoff_outcome_validation_failures", labels(workflow="onboarding", workspace="7"))
        ]
        == Finding.objects.filter(outcome_validation=True).count()
        == 1
    )
    run = health_world["run"]
    assert samples[("handoff_reconciliation_last_run_keys_compared", ())] == run.keys_compared
    assert samples[
        ("handoff_reconciliation_last_run_timestamp_seconds", labels(status="completed"))
    ] == pytest.approx(run.finished_at.timestamp())


def test_metrics_run_a_fixed_number_of_queries(client, health_world, django_assert_max_num_queries):
    # The queries do not grow with the number of handoffs, workflows or workspaces (3 of them: incidents,
    # their notifications, alerts given up), one for the database's now (ages on the stored times' clock) and
    # one for the counts retention carried out of the hot tables (ArchivedTotal).
    with django_assert_max_num_queries(19):
        response = client.get(reverse("reconciliation:metrics"), **AUTH)
    assert response.status_code == 200
    families = {family.name for family in text_string_to_metric_families(response.content.decode())}
    assert {
        "handoff_handoffs",
        "handoff_needs_attention",
        "handoff_reconciliation_findings",
    } <= families


def test_a_notification_that_could_not_be_sent_is_in_metrics(client, world):
    incident = Incident.objects.create(
        cause="security:replay", kind="security", severity="page", title="replays"
    )
    channel = AlertChannel.objects.create(
        name="pager", kind="webhook", target="http://127.0.0.1:9/"
    )
    Notification.objects.create(
        incident=incident,
        channel=channel,
        number=1,
        event="trigger",
        message_id="incident-1-1",
        state=NotificationState.FAILED,
    )
    families = {
        family.name: family
        for family in text_string_to_metric_families(
            client.get(reverse("reconciliation:metrics"), **AUTH).content.decode()
        )
    }
    failed = [
        s for s in families["handoff_alert_notifications"].samples if s.labels["state"] == "failed"
    ]
    assert [s.value for s in failed] == [1.0]
    assert {
        (s.labels["kind"], s.labels["state"]) for s in families["handoff_incidents"].samples
    } == {("security", "open")}


def test_the_pending_alerts_age_skips_an_intended_hold_and_counts_from_its_end(
    client, health_world
):
    """Fails on the old code (no such figure: HandoffPendingTooLong read the age since recorded, so it paged
    through an operator's pause, a window or a Retry-After wait the backlog incident keeps quiet for)."""
    key = ("handoff_oldest_due_age_seconds", labels(workflow="onboarding", workspace="7"))
    due = Handoff.objects.due().filter(workflow="onboarding", workspace_id=7)
    now = db_time()
    due.update(next_attempt_at=now - timedelta(minutes=30))
    oldest = now - timedelta(minutes=30)
    assert scrape(client)[key] == pytest.approx(30 * 60, abs=30)
    destinations = set(due.values_list("destination", flat=True))
    holds = [
        DestinationHold.objects.create(
            destination=name,
            kind=HoldKind.OPERATOR_PAUSE,
            reason="their migration",
            starts_at=oldest - timedelta(minutes=1),
        )
        for name in destinations
    ]
    samples = scrape(client)
    assert key not in samples
    pending = (
        "handoff_oldest_age_seconds",
        labels(workflow="onboarding", workspace="7", state="pending"),
    )
    assert samples[pending] > 900
    DestinationHold.objects.filter(pk__in=[h.pk for h in holds]).update(
        ended_at=db_time() - timedelta(minutes=2), ended_by="op"
    )
    assert scrape(client)[key] == pytest.approx(120, abs=30)


def test_the_pending_alerts_age_leaves_out_an_alert_channels_backlog(client, health_world):
    """An alert channel's notifications wait on its own destination (`alert-channel-<id>`): the backlog incident
    leaves them out (the channel has its own figures and rule), and HandoffPendingTooLong's figure did not."""
    due = Handoff.objects.due().filter(workflow="onboarding", workspace_id=7)
    now = db_time()
    due.update(next_attempt_at=now - timedelta(minutes=30))
    notification = due.order_by("id").first()
    Handoff.objects.filter(pk=notification.pk).update(
        workflow=NOTIFICATION_WORKFLOW, destination=f"{CHANNEL_DESTINATION_PREFIX}1"
    )
    samples = scrape(client)
    assert samples[
        ("handoff_oldest_due_age_seconds", labels(workflow="onboarding", workspace="7"))
    ] == pytest.approx(30 * 60, abs=30)
    channel = (
        "handoff_oldest_due_age_seconds",
        labels(workflow=NOTIFICATION_WORKFLOW, workspace="7"),
    )
    assert channel not in samples
