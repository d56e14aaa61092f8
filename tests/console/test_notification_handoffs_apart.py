"""The product's alert notifications ride the engine as handoffs (workflow `incident_notifications`, keys
`incident:…`) but are no workspace's business (issue 36): the handoff list and Health's counts leave them out
by default; the list shows them when asked (`origin=notifications`, or both with `origin=all`)."""

import re
from html import unescape

import pytest

from incidents.channels.delivery import channel_destination_name
from incidents.models import AlertChannel, ChannelKind
from outbox.clock import db_time
from outbox.models import (
    Attempt,
    AttemptOutcome,
    Handoff,
    HandoffEvent,
    HandoffState,
)
from outbox.models.handoffs import NOTIFICATION_WORKFLOW
from reconciliation.selectors import duplicate_attempts, health_summary, manual_interventions
from reconciliation.selectors.needing_person import needing_person_counts_bounded
from tests.builders import approve
from tests.console.clients import client_for, row_of
from tests.factories import HandoffFactory, pause_by_breaker

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


@pytest.fixture
def business_and_notifications(world):
    """Request 42's step pending in workspace 7; two notifications of an incident of workspace 7, one
    pending, one that could not be sent (needs attention)."""
    step = approve(world)
    pending, failed = (
        HandoffFactory(
            workflow=NOTIFICATION_WORKFLOW,
            action_key=f"incident:7:1:{n}:1",
            source_ref=f"incident 1 notification incident-1-{n}",
            source_id=0,
            destination="alert-channel-1",
            payload={"id": f"incident-1-{n}"},
            state=state,
        )
        for n, state in ((1, HandoffState.PENDING), (2, HandoffState.NEEDS_ATTENTION))
    )
    return step, pending, failed


def _rows(client, **params) -> set[str]:
    page = client.get("/handoffs/", params)
    assert page.status_code == 200
    return {h.action_key for h in page.context["handoffs"]}


def test_the_handoff_list_shows_the_workspaces_handoffs_and_notifications_only_when_asked(
    world, business_and_notifications
):
    step, pending, failed = business_and_notifications
    olga = client_for(world["olga"])
    assert _rows(olga) == {step.action_key}
    assert _rows(olga, state="needs_attention") == set()
    assert _rows(olga, origin="notifications") == {pending.action_key, failed.action_key}
    assert _rows(olga, origin="all") == {step.action_key, pending.action_key, failed.action_key}


def test_health_counts_and_the_header_leave_the_notifications_out(
    world, business_and_notifications
):
    figures = health_summary([7])["figures"]
    assert figures["pending"]["value"] == 1
    assert figures["needs_attention"]["value"] == 0
    assert figures["needing_person"]["value"] == 0
    assert needing_person_counts_bounded([7]) == {}


def _cells(row: str) -> list[str]:
    """Each cell's text (its tags dropped)."""
    cells = [cell.split(">", 1)[1].split("</td>", 1)[0] for cell in row.split("<td")[1:]]
    return [unescape(re.sub(r"<[^>]+>", "", cell)) for cell in cells]


def test_health_has_a_line_for_the_alert_channels_delivery(world, business_and_notifications):
    page = client_for(world["olga"]).get("/health/").content.decode()
    row = row_of(page, "channel-alert-channel-1")
    assert _cells(row)[1:] == ["1", "0", "1", "taking calls"]
    assert 'href="/health/notifications/?destination=alert-channel-1"' in row
    assert "(<code>incidents.view_security_incident</code>), never to a workspace" in page


def test_home_lists_the_workspaces_handoffs_that_need_a_person_not_the_notifications(
    world, business_and_notifications
):
    """Home's "need a person" was the one table that listed a failed alert notification as a workspace's
    business, beside the header's count that leaves it out."""
    _step, _pending, failed = business_and_notifications
    page = client_for(world["olga"]).get("/")
    assert page.status_code == 200
    assert failed.action_key not in {h.action_key for h in page.context["handoffs"]}
    assert "Nothing needs a person." in page.content.decode()


def _attempts(handoff, outcomes: list[str]) -> None:
    now = db_time()
    for number, outcome in enumerate(outcomes, start=1):
        Attempt.objects.create(
            handoff=handoff,
            number=number,
            fencing_epoch=1,
            worker="w",
            started_at=now,
            finished_at=now,
            outcome=outcome,
        )


def test_health_attempt_figures_count_the_workspaces_handoffs_not_the_notifications(
    world, business_and_notifications
):
    """Duplicate preventions, the failed-attempts chart and manual interventions (and the lists behind
    them) counted the alert notifications' attempts and events as the workspace's."""
    step, pending, failed = business_and_notifications
    _attempts(step, [AttemptOutcome.FAILED, AttemptOutcome.DUPLICATE])
    _attempts(pending, [AttemptOutcome.FAILED, AttemptOutcome.DUPLICATE])
    _attempts(failed, [AttemptOutcome.FAILED, AttemptOutcome.ABANDONED, AttemptOutcome.DUPLICATE])
    for handoff in (step, failed):
        HandoffEvent.objects.create(
            handoff=handoff,
            to_state="pending",
            actor=world["olga"],
            actor_label="olga",
            action="retry",
        )

    summary = health_summary([7])
    figures = summary["figures"]
    assert figures["duplicate_preventions"]["value"] == 1
    assert figures["manual_interventions"]["value"] == 1
    assert sum(hour["failed"] for hour in summary["series"]) == 1
    assert {a.handoff_id for a in duplicate_attempts([7])} == {step.pk}
    assert {e.handoff_id for e in manual_interventions([7])} == {step.pk}


def test_health_says_each_alert_channels_delivery_and_failure_in_one_line(
    world, business_and_notifications
):
    """ "Alert channels' delivery" (per destination: waiting, unknown, not sent) and "Alert channel failing"
    (per channel: not sent, paused, the path its incidents take) were two tables from two selectors, and a
    third count of the same failures stood among the incident figures: one table now says it all."""
    _step, pending, failed = business_and_notifications
    hook = AlertChannel.objects.create(
        workspace_id=7, name="ops hook", kind=ChannelKind.WEBHOOK, target="https://hooks.example/x"
    )
    mail = AlertChannel.objects.create(
        workspace_id=7, name="ops mail", kind=ChannelKind.EMAIL, target="ops@example.com"
    )
    idle = AlertChannel.objects.create(
        workspace_id=None, name="all", kind=ChannelKind.EMAIL, target="all@example.com"
    )
    Handoff.objects.filter(pk=failed.pk).update(destination=channel_destination_name(hook))
    Handoff.objects.filter(pk=pending.pk).update(destination=channel_destination_name(mail))
    pause_by_breaker(channel_destination_name(hook), code="http_500", detail="from the hook")
    page = client_for(world["olga"]).get("/health/").content.decode()

    assert page.count('id="alert-channels"') == 1
    assert 'id="failing-channels"' not in page and 'id="notification-delivery"' not in page
    assert "fig-notifications-failed" not in page and "Alert channel failing" not in page
    row = row_of(page, f"channel-{channel_destination_name(hook)}")
    kind = ChannelKind.WEBHOOK.label
    assert _cells(row) == [f"ops hook ({kind})", "0", "0", "1", "paused: http_500: from the hook"]
    assert 'class="failing"' in row and "/health/notifications/?destination=" in row
    row = row_of(page, f"channel-{channel_destination_name(mail)}")
    assert _cells(row) == [f"ops mail ({ChannelKind.EMAIL.label})", "1", "0", "0", "taking calls"]
    assert 'class="failing"' not in row
    assert f"channel-{channel_destination_name(idle)}" not in page
    assert "opens no incident of its own" in page
