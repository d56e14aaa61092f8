"""A security incident's notifications (handoffs of workspace 0, their payload the incident's title and
summary: `HandoffQuerySet.security_notifications`) are shown only to holders of
`incidents.view_security_incident`, as the incidents are: in the admin's handoffs, attempts and events (which
support staff view through their group), and in Health's *Alert channels* counts, where no workspace's scope
holds workspace 0. A workspace's notifications stay shown to support either way."""

import html
import re

import pytest
from django.contrib.auth.models import Permission
from django.test import Client

from approvals.services import support_staff_enroll
from incidents.channels.delivery import channel_destination_name
from incidents.models import AlertChannel, ChannelKind
from outbox.clock import db_time
from outbox.models import Attempt, AttemptOutcome, HandoffEvent, HandoffState
from outbox.models.handoffs import NOTIFICATION_WORKFLOW
from tests.console.clients import client_for
from tests.factories import HandoffFactory, make_user

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])

TITLE = "forged signatures at intake"


def _permission() -> Permission:
    return Permission.objects.get(
        content_type__app_label="incidents", codename="view_security_incident"
    )


def _notification(workspace_id: int, number: int, destination: str, state=HandoffState.PENDING):
    scope = "-" if workspace_id == 0 else workspace_id
    handoff = HandoffFactory(
        workflow=NOTIFICATION_WORKFLOW,
        workspace_id=workspace_id,
        action_key=f"incident:{scope}:{number}:1:1",
        source_ref=f"incident {number} notification incident-{number}-1",
        source_id=0,
        destination=destination,
        payload={"id": f"incident-{number}-1", "title": TITLE if workspace_id == 0 else "failing"},
        state=state,
    )
    now = db_time()
    attempt = Attempt.objects.create(
        handoff=handoff,
        number=1,
        fencing_epoch=1,
        worker="w",
        started_at=now,
        finished_at=now,
        outcome=AttemptOutcome.FAILED,
    )
    event = HandoffEvent.objects.create(
        handoff=handoff, to_state=state, actor_label="dispatcher", action=""
    )
    return handoff, attempt, event


@pytest.fixture
def notifications(world):
    """A security incident's notification (workspace 0) and one of workspace 7's incident, each with an
    attempt and an event."""
    return (
        _notification(0, 1, "alert-channel-1"),
        _notification(7, 2, "alert-channel-1"),
    )


def _support(name: str, *, granted: bool) -> Client:
    user = make_user(name)
    support_staff_enroll(user=user)
    if granted:
        user.user_permissions.add(_permission())
    return client_for(user)


ADMIN_PAGES = ("outbox/handoff", "outbox/attempt", "outbox/handoffevent")


def _admin_listed(client: Client, page: str) -> set[int]:
    response = client.get(f"/admin/{page}/")
    assert response.status_code == 200
    return {row.pk for row in response.context["cl"].result_list}


def _change_page(client: Client, page: str, pk: int) -> int:
    return client.get(f"/admin/{page}/{pk}/change/").status_code


def test_support_without_the_permission_see_no_security_notification_in_the_admin(
    world, notifications
):
    security, ours = notifications
    support = _support("sam", granted=False)
    for page, secret, shown in zip(ADMIN_PAGES, security, ours, strict=True):
        assert _admin_listed(support, page) == {shown.pk}, page
        # The admin answers a row outside its queryset as missing: back to the index, nothing shown.
        assert _change_page(support, page, secret.pk) == 302, page
        assert _change_page(support, page, shown.pk) == 200, page
    found = support.get("/admin/outbox/handoff/", {"q": "forged"})
    assert found.status_code == 200 and list(found.context["cl"].result_list) == []


def test_a_holder_of_the_permission_sees_them_in_the_admin(world, notifications):
    security, ours = notifications
    support = _support("sue", granted=True)
    for page, secret, shown in zip(ADMIN_PAGES, security, ours, strict=True):
        assert _admin_listed(support, page) == {secret.pk, shown.pk}, page
        response = support.get(f"/admin/{page}/{secret.pk}/change/")
        assert response.status_code == 200, page
    assert TITLE in support.get(f"/admin/outbox/handoff/{security[0].pk}/change/").content.decode()


def test_a_failed_security_notification_shows_on_the_holders_health_only(world):
    """Health counted the notifications of the viewer's workspaces only, and no scope holds workspace 0: a
    channel whose only failure was a security page had no row, and the page said nothing failed."""
    channel = AlertChannel.objects.create(
        workspace_id=None, name="security pager", kind=ChannelKind.EMAIL, target="sec@example.com"
    )
    name = channel_destination_name(channel)
    _notification(0, 1, name, state=HandoffState.NEEDS_ATTENTION)
    olga = world["olga"]

    page = client_for(olga).get("/health/")
    assert page.status_code == 200
    assert [row.destination for row in page.context["alert_channels"].rows] == []
    assert "No notification waits or failed" in page.content.decode()

    olga.user_permissions.add(_permission())
    page = client_for(olga).get("/health/")
    rows = page.context["alert_channels"].rows
    assert [(row.destination, row.failed, row.failing) for row in rows] == [(name, 1, True)]
    assert f'id="channel-{name}" class="failing"' in page.content.decode()
    # A workspace chosen narrows the page to it: the security notifications are of none.
    page = client_for(olga).get("/health/", {"workspace": 7})
    assert page.context["alert_channels"].rows == []


def _channel_link(page, name: str) -> str:
    """The href of the channel's row on Health, as a browser would follow it."""
    row = re.search(rf'<tr id="channel-{re.escape(name)}"[^>]*><td><a href="([^"]+)"', page)
    assert row, f"no row for {name}"
    return html.unescape(row.group(1))


def _counted_and_listed(
    client: Client, name: str, notifications, **health_query
) -> tuple[int, set[int]]:
    """The channel's row's count on Health, and which of `notifications` the page behind its link lists."""
    page = client.get("/health/", health_query)
    [row] = [r for r in page.context["alert_channels"].rows if r.destination == name]
    listed = client.get(_channel_link(page.content.decode(), name))
    assert listed.status_code == 200
    shown = listed.content.decode()
    keys = {h.pk for h in notifications if f"<code>{h.action_key}</code>" in shown}
    return row.waiting + row.uncertain + row.failed, keys


def test_the_channels_link_on_health_lists_exactly_what_its_row_counts_to_holders_only(world):
    """Health's link for a channel's notifications opened the handoff list, which covers the viewer's
    workspaces only: a holder of the permission saw a security notification counted but not listed."""
    channel = AlertChannel.objects.create(
        workspace_id=None, name="security pager", kind=ChannelKind.EMAIL, target="sec@example.com"
    )
    name = channel_destination_name(channel)
    security, _, _ = _notification(0, 1, name, state=HandoffState.NEEDS_ATTENTION)
    ours, _, _ = _notification(7, 2, name)
    delivered, _, _ = _notification(7, 3, name, state=HandoffState.DELIVERED)  # not counted
    elsewhere, _, _ = _notification(7, 4, "alert-channel-999")  # another channel's
    every = (security, ours, delivered, elsewhere)
    olga = world["olga"]

    assert _counted_and_listed(client_for(olga), name, every) == (1, {ours.pk})
    olga.user_permissions.add(_permission())
    counted, listed = _counted_and_listed(client_for(olga), name, every)
    assert (counted, listed) == (2, {security.pk, ours.pk})
    page = client_for(olga).get(
        _channel_link(client_for(olga).get("/health/").content.decode(), name)
    )
    assert "a security incident (no workspace)" in page.content.decode()
    # A workspace chosen narrows the count to it, and the list behind it with it.
    assert _counted_and_listed(client_for(olga), name, every, workspace=7) == (1, {ours.pk})
