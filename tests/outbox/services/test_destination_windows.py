"""An operator's pause and a maintenance window: no attempt, probe or call is spent while one is on, the
waiting handoffs say why and until when, and the destination drains by itself at the end. Time is moved by
writing the window's times on the database clock, never by sleeping."""

from datetime import timedelta

import pytest
from django.utils import timezone

from incidents.models import Incident, IncidentKind
from incidents.sweep import alerts_send_due
from outbox.clock import db_now_plus
from outbox.dispatch.claims import handoff_claim_due
from outbox.dispatch.dispatcher import dispatch_batch
from outbox.dispatch.leases import handoff_release_claims
from outbox.guidance import next_step
from outbox.hold_lines import destination_holds_now
from outbox.models import (
    DestinationEvent,
    DestinationHealth,
    DestinationHold,
    DestinationState,
    Handoff,
    HandoffState,
)
from outbox.services.destination_windows import (
    InvalidWindow,
    destination_pause_by_operator,
    destination_resume_by_operator,
    destination_schedule_window,
)
from tests.factories import make_user
from tests.outbox.scripted_destination import ScriptedDestination

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
S = HandoffState


@pytest.fixture
def olga():
    return make_user("olga")


def test_while_paused_by_an_operator_nothing_is_claimed_called_or_spent(make_handoff, olga):
    handoff = make_handoff(1)
    destination_pause_by_operator(name="receiver", actor=olga, reason="receiver upgrade")
    destination = ScriptedDestination()
    stats = dispatch_batch(destination=destination)
    assert (stats.claimed, destination.calls) == (0, 0)
    assert stats.limited
    handoff.refresh_from_db()
    assert (handoff.state, handoff.attempts) == (S.PENDING, 0)
    health = DestinationHealth.objects.get(name="receiver")
    # The breaker is not involved: no pause of its own, no probe spent, and nothing pages.
    assert (health.state, health.probes) == (DestinationState.ACTIVE, 0)
    alerts_send_due()
    assert not Incident.objects.filter(kind=IncidentKind.DESTINATION).exists()


def test_a_waiting_handoff_says_who_paused_it_why_and_until_when(make_handoff, olga):
    handoff = make_handoff(1)
    destination_pause_by_operator(name="receiver", actor=olga, reason="receiver upgrade")
    holds = destination_holds_now("receiver")
    guidance = next_step(handoff, holds=holds)
    assert guidance.headline == "Waiting: destination receiver is held."
    # The destination page's words: who paused it, why and until when.
    [line] = holds.live
    assert line.words.endswith("until an operator resumes it · set by olga")
    assert f"Holds: {line.words}." in guidance.detail and "receiver upgrade" in line.words
    assert "retry" in guidance.avoid


def test_after_a_resume_the_destination_drains_by_itself(make_handoff, olga):
    make_handoff(1), make_handoff(2)
    destination_pause_by_operator(name="receiver", actor=olga, reason="receiver upgrade")
    assert dispatch_batch(destination=ScriptedDestination()).claimed == 0
    destination_resume_by_operator(name="receiver", actor=olga, reason="upgrade done")
    assert not destination_holds_now("receiver").held
    assert dispatch_batch(destination=ScriptedDestination()).delivered == 2
    actions = list(
        DestinationEvent.objects.filter(destination="receiver")
        .order_by("id")
        .values_list("action", "actor_label")
    )
    assert actions == [("operator_pause", "olga"), ("operator_resume", "olga")]


def inserted_again(hold: DestinationHold) -> None:
    """The same row, deleted and inserted again: on PostgreSQL its tuple now comes after the others, as an
    update in place can move it (a read without ORDER BY then returns it last)."""
    pk = hold.pk
    hold.delete()
    hold.pk = pk
    hold.save(force_insert=True)


def test_a_resume_that_ends_several_windows_names_them_in_the_order_they_started(olga):
    now = timezone.now()
    earlier, later = (
        destination_schedule_window(
            name="receiver",
            actor=olga,
            reason=f"maintenance {n}",
            starts_at=now - timedelta(hours=hours),
            ends_at=now + timedelta(hours=1),
        )
        for n, hours in ((1, 3), (2, 2))
    )
    inserted_again(earlier)
    destination_resume_by_operator(name="receiver", actor=olga, reason="both done")
    event = DestinationEvent.objects.get(destination="receiver", action="operator_resume")
    first, second = (
        f"maintenance window from {w.starts_at:%Y-%m-%d %H:%M} UTC" for w in (earlier, later)
    )
    assert f"ended by an operator ({first}, {second}): both done" in event.reason


def test_a_maintenance_window_holds_only_while_it_is_on_and_ends_on_time(make_handoff, olga):
    make_handoff(1)
    now = timezone.now()
    destination_schedule_window(
        name="receiver",
        actor=olga,
        reason="receiver's database maintenance",
        starts_at=now + timedelta(hours=1),
        ends_at=now + timedelta(hours=2),
    )
    # Not started yet: deliveries go on.
    assert dispatch_batch(destination=ScriptedDestination()).delivered == 1
    make_handoff(2)
    # The window starts (its start is moved to the database's past) ...
    DestinationHold.objects.filter(destination="receiver").update(starts_at=db_now_plus(-1))
    destination = ScriptedDestination()
    assert dispatch_batch(destination=destination).claimed == 0 and destination.calls == 0
    guidance = next_step(
        Handoff.objects.get(action_key__endswith=":2:1"), holds=destination_holds_now("receiver")
    )
    assert "Maintenance window: receiver's database maintenance · since " in guidance.detail
    # ... and ends (its end is now the database's past): the destination drains without anyone.
    DestinationHold.objects.filter(destination="receiver").update(ends_at=db_now_plus(-0.001))
    assert dispatch_batch(destination=ScriptedDestination()).delivered == 1


@pytest.mark.parametrize(
    "call",
    [
        lambda olga: destination_pause_by_operator(name="receiver", actor=olga, reason="  "),
        lambda olga: destination_pause_by_operator(
            name="receiver", actor=olga, reason="x", for_seconds=0
        ),
        lambda olga: destination_schedule_window(
            name="receiver",
            actor=olga,
            reason="x",
            starts_at=timezone.now() + timedelta(hours=2),
            ends_at=timezone.now() + timedelta(hours=1),
        ),
        lambda olga: destination_schedule_window(
            name="receiver",
            actor=olga,
            reason="x",
            starts_at=timezone.now() - timedelta(hours=2),
            ends_at=timezone.now() - timedelta(hours=1),
        ),
        lambda olga: destination_resume_by_operator(name="receiver", actor=olga, reason="x"),
    ],
    ids=["no reason", "no length", "ends before it starts", "over already", "nothing to resume"],
)
def test_a_window_that_cannot_be_set_is_refused_and_writes_nothing(call, olga):
    with pytest.raises(InvalidWindow):
        call(olga)
    assert not DestinationEvent.objects.exists()
    assert not DestinationHold.objects.exists()


def test_a_row_written_without_the_window_columns_is_accepted_and_takes_calls(make_handoff):
    """What a dispatcher of the release before (or the bench) writes: the columns its model knows. That
    release took `window_*` and `hold_*` out of the model and this one dropped them (outbox 0031), so its
    insert names none of them, works, and the destination is open."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO outbox_destinationhealth (name, state, pause_reason, consecutive_failures, "
            "probes, last_error, updated_at, max_concurrency, max_requests_per_second) "
            "VALUES ('receiver', 'active', '', 0, 0, '', CURRENT_TIMESTAMP, NULL, NULL)"
        )
    assert DestinationHealth.objects.filter(name="receiver", state="active").exists()
    make_handoff(1)
    assert dispatch_batch(destination=ScriptedDestination()).delivered == 1


def test_a_window_scheduled_during_a_pause_is_a_second_hold_and_neither_ends_the_other(
    make_handoff, olga
):
    """Issue 36, item 1: olga paused the destination, then scheduled a later window; the window took the
    pause's place and a step was delivered inside the pause. Now each is a hold of its own."""
    make_handoff(1)
    pause = destination_pause_by_operator(name="receiver", actor=olga, reason="accounts migration")
    now = timezone.now()
    window = destination_schedule_window(
        name="receiver",
        actor=olga,
        reason="database maintenance",
        starts_at=now + timedelta(minutes=27),
        ends_at=now + timedelta(hours=1),
    )
    destination = ScriptedDestination()
    assert dispatch_batch(destination=destination).claimed == 0 and destination.calls == 0
    holds = destination_holds_now("receiver")
    assert [line.hold_id for line in holds.live] == [pause.pk]
    assert holds.next_scheduled.hold_id == window.pk
    # The window starts while the pause is on; ending the pause leaves the window holding.
    DestinationHold.objects.filter(pk=window.pk).update(starts_at=db_now_plus(-1))
    destination_resume_by_operator(name="receiver", actor=olga, reason="migration done")
    assert dispatch_batch(destination=ScriptedDestination()).claimed == 0
    assert [line.hold_id for line in destination_holds_now("receiver").live] == [window.pk]
    # And the window ending (its end passes) frees it: nothing else holds it.
    DestinationHold.objects.filter(pk=window.pk).update(ends_at=db_now_plus(-0.001))
    assert dispatch_batch(destination=ScriptedDestination()).delivered == 1
    assert Handoff.objects.get().attempts == 1


def test_a_window_that_ends_leaves_a_pause_set_during_it(make_handoff, olga):
    make_handoff(1)
    now = timezone.now()
    window = destination_schedule_window(
        name="receiver",
        actor=olga,
        reason="database maintenance",
        starts_at=now + timedelta(hours=1),
        ends_at=now + timedelta(hours=2),
    )
    DestinationHold.objects.filter(pk=window.pk).update(starts_at=db_now_plus(-1))
    destination_pause_by_operator(name="receiver", actor=olga, reason="accounts migration")
    destination_resume_by_operator(
        name="receiver", actor=olga, reason="maintenance done early", hold_id=window.pk
    )
    assert dispatch_batch(destination=ScriptedDestination()).claimed == 0
    [line] = destination_holds_now("receiver").live
    assert (line.kind, line.reason, line.who) == (
        "Paused by an operator",
        "accounts migration",
        "olga",
    )


def test_a_send_given_back_for_a_hold_adds_no_attempt_to_the_handoff(make_handoff, olga):
    """Issue 36, item 8: a claim given back unsent because a hold began is not the handoff's attempt."""
    make_handoff(1)
    claims = handoff_claim_due(worker="w1", destination_name="receiver")
    destination_pause_by_operator(name="receiver", actor=olga, reason="receiver upgrade")
    assert handoff_release_claims(claims=claims, reason="not sent: destination paused") == 1
    handoff = Handoff.objects.get()
    assert (handoff.state, handoff.attempts, handoff.attempts_made) == (S.PENDING, 1, 0)
    destination_resume_by_operator(name="receiver", actor=olga, reason="upgrade done")
    assert dispatch_batch(destination=ScriptedDestination()).delivered == 1
    handoff.refresh_from_db()
    assert (handoff.attempts, handoff.attempts_made) == (2, 1)
