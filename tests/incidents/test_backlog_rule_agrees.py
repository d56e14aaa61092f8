"""The backlog rule, once (issue 40): the console's backlog incident (`incidents/causes.py`) and the Prometheus
figure HandoffPendingTooLong pages on (`/metrics`' `handoff_oldest_due_age_seconds`) both read the outbox's
`HandoffQuerySet.backlog` and `DestinationHold.objects.backlog_since`. On the same data (an operator's pause,
a live window, a window that ended, a live Retry-After wait, an alert channel's destination, a case hold,
the breaker's pause) they count the same destinations with the same age; the breaker's pause is the one
documented difference (the console pages it as the pause). Both backends."""

import pytest
from django.urls import reverse
from prometheus_client.parser import text_string_to_metric_families

from incidents.causes import backlog_causes
from outbox.clock import DbNow, db_time
from outbox.models import DestinationHealth, DestinationHold, Handoff, HoldKind
from outbox.models.handoffs import CHANNEL_DESTINATION_PREFIX
from outbox.services import handoff_record
from outbox.services.case_holds import case_hold

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])

DUE_AGO = 1800.0
# The destination of each workflow's one handoff, due DUE_AGO seconds ago, and the hold on it.
CASES = {
    "plain": None,
    "paused": (HoldKind.OPERATOR_PAUSE, -3600.0, None),
    "window-live": (HoldKind.WINDOW, -3600.0, 3600.0),
    "window-ended": (HoldKind.WINDOW, -3600.0, -120.0),
    "retry-after": (HoldKind.RETRY_AFTER, -60.0, 600.0),
    f"{CHANNEL_DESTINATION_PREFIX}1": None,
    "case-held": None,
    "breaker": (HoldKind.BREAKER, -3600.0, None),
}
# What the rule counts: the age each destination's backlog has (None: not counted).
EXPECTED_AGE = {"plain": DUE_AGO, "window-ended": 120.0, "breaker": DUE_AGO}


def one_due_handoff_each(world) -> dict[str, int]:
    pks = {}
    for n, destination in enumerate(CASES, start=1):
        handoff = handoff_record(
            workflow=f"wf-{destination}",
            workspace_id=7,
            source_ref=f"request {n} revision 1",
            source_id=n,
            action_key=f"wf-{destination}:7:{n}:1",
            payload={"client_name": f"Client {n}", "plan": "standard"},
            destination=destination,
        )
        pks[destination] = handoff.pk
        DestinationHealth.objects.get_or_create(name=destination)
    Handoff.objects.update(next_attempt_at=DbNow(-DUE_AGO))
    for destination, hold in CASES.items():
        if hold is not None:
            kind, starts, ends = hold
            DestinationHold.objects.create(
                destination=destination,
                kind=kind,
                reason="test",
                starts_at=DbNow(starts),
                ends_at=None if ends is None else DbNow(ends),
                until_probe=kind == HoldKind.BREAKER,
            )
    case_hold(handoff_id=pks["case-held"], actor=world["olga"], reason="calling", whole_case=False)
    return pks


def metric_ages(client) -> dict[str, float]:
    response = client.get(
        reverse("reconciliation:metrics"), HTTP_AUTHORIZATION="Bearer metrics-test-token"
    )
    assert response.status_code == 200
    ages = {}
    for family in text_string_to_metric_families(response.content.decode()):
        if family.name == "handoff_oldest_due_age_seconds":
            for sample in family.samples:
                assert sample.labels["workspace"] == "7"
                ages[sample.labels["workflow"].removeprefix("wf-")] = sample.value
    return ages


def test_the_backlog_incident_and_the_prometheus_figure_count_the_same_backlog(
    client, settings, world
):
    """Fails on the code before, where each side wrote the rule itself: the incident path left out only the
    destinations an operator's hold or the breaker held now, so a destination under a live Retry-After wait
    with due handoffs at the depth limit paged "falling behind while no call fails", which the Prometheus
    figure (leaving every live intended hold out) never counted. Fails again if either side drifts."""
    settings.ALERT_BACKLOG_AGE_SECONDS = 60  # every backlog counted here pages, by its age...
    settings.ALERT_BACKLOG_DEPTH = 1  # ...or by its depth alone, whatever its age
    one_due_handoff_each(world)
    now = db_time()

    metric = metric_ages(client)
    causes = {
        cause.details["destination"]: (now - cause.details["since"]).total_seconds()
        for cause in backlog_causes(now=now)
    }

    assert metric == pytest.approx(EXPECTED_AGE, abs=30)
    # The breaker's pause pages as the destination's own incident, not as a backlog: the one difference.
    assert causes == pytest.approx({"plain": DUE_AGO, "window-ended": 120.0}, abs=30)
    assert {name: age for name, age in metric.items() if name != "breaker"} == pytest.approx(
        causes, abs=5
    )
