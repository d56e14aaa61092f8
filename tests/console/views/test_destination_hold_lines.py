"""Every screen says a destination's holds in the same words (issue 36): the destination's page, Health and
`manage.py destinations holds` list each live hold (kind, reason, since, until, who) and the next one
scheduled; ending one from the page or the command line leaves the others."""

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from outbox.clock import db_now_plus
from outbox.hold_lines import destination_holds_now
from outbox.models import (
    DestinationConfig,
    DestinationEvent,
    DestinationHealth,
    DestinationHold,
)
from outbox.services.destination_windows import (
    destination_pause_by_operator,
    destination_schedule_window,
)
from tests.console.clients import client_for
from tests.factories import grant_destination_admin, pause_by_breaker, retry_after_hold

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


@pytest.fixture
def held(world):
    """crm paused by olga, in a window that started during the pause, another window ahead, and asked to
    wait by a Retry-After answer."""
    DestinationConfig.objects.create(name="crm", kind="in_process", config={})
    olga = grant_destination_admin(world["olga"])
    now = timezone.now()
    pause = destination_pause_by_operator(name="crm", actor=olga, reason="crm upgrade")
    window = destination_schedule_window(
        name="crm",
        actor=olga,
        reason="database maintenance",
        starts_at=now + timedelta(hours=1),
        ends_at=now + timedelta(hours=2),
    )
    DestinationHold.objects.filter(pk=window.pk).update(starts_at=db_now_plus(-1))
    ahead = destination_schedule_window(
        name="crm",
        actor=olga,
        reason="index rebuild",
        starts_at=now + timedelta(days=1),
        ends_at=now + timedelta(days=1, hours=1),
    )
    retry_after_hold("crm", 60)
    return {"olga": olga, "pause": pause, "window": window, "ahead": ahead}


def test_the_page_health_and_the_cli_list_every_live_hold_and_the_next_in_one_wording(world, held):
    holds = destination_holds_now("crm")
    # The operators' holds by start (the window's was moved before the pause's), then the Retry-After.
    assert [line.kind for line in holds.live] == [
        "Maintenance window",
        "Paused by an operator",
        "Retry-After hold",
    ]
    assert holds.next_scheduled.reason == "index rebuild"
    words = [line.words for line in holds.live] + [holds.next_scheduled.words]
    assert words[1].startswith("Paused by an operator: crm upgrade · since ")
    assert words[1].endswith(" · until an operator resumes it · set by olga")

    olga = client_for(held["olga"])
    page = olga.get("/destinations/crm/").content.decode()
    health = olga.get("/health/").content.decode()
    out = StringIO()
    call_command("destinations", "holds", "crm", stdout=out)
    for line in words:
        assert line in page and line in health and line in out.getvalue()


def test_ending_one_hold_from_the_page_leaves_the_others(world, held):
    olga = client_for(held["olga"])
    answer = olga.post(
        "/destinations/crm/resume", {"reason": "upgrade done", "hold": held["pause"].pk}
    )
    assert answer.status_code == 302
    kinds = [line.kind for line in destination_holds_now("crm").live]
    assert kinds == ["Maintenance window", "Retry-After hold"]
    assert DestinationHold.objects.get(pk=held["pause"].pk).ended_by == "olga"
    refused = olga.post("/destinations/crm/resume", {"reason": "x", "hold": "seven"})
    assert refused.status_code == 422
    assert b"hold must be a hold&#x27;s number" in refused.content


def test_the_cli_pauses_schedules_and_ends_one_hold_in_the_console_words(world):
    def run(*args):
        out = StringIO()
        call_command("destinations", *args, stdout=out)
        return out.getvalue()

    said = run("pause", "receiver", "--reason", "accounts migration")
    [pause] = DestinationHold.objects.all()
    assert f"held  #{pause.pk} Paused by an operator: accounts migration · since " in said
    assert said.rstrip().endswith("until an operator resumes it · set by manage.py destinations")
    said = run(
        "window",
        "receiver",
        "--from",
        "2099-01-01 22:00",
        "--to",
        "2099-01-01 23:00",
        "--reason",
        "database maintenance",
    )
    window = DestinationHold.objects.exclude(pk=pause.pk).get()
    assert f"next  #{window.pk} Maintenance window: database maintenance · since 2099-01-01" in said
    # Ending the pause leaves the window scheduled; a time that cannot be read changes nothing.
    said = run("resume", "receiver", "--reason", "migration done", "--hold", str(pause.pk))
    assert "receiver: no hold live" in said and f"next  #{window.pk} " in said
    with pytest.raises(CommandError, match="nothing changed: --from must be"):
        run("window", "receiver", "--from", "soon", "--to", "2099-01-01 23:00", "--reason", "x")
    assert DestinationHold.objects.count() == 2
    assert list(DestinationEvent.objects.values_list("actor_label", flat=True).distinct()) == [
        "manage.py destinations"
    ]


def test_a_probe_time_already_past_reads_due_now_on_health_never_as_a_past_time(world):
    """Issue 36, item 8: a 'next probe' time already past stayed on screen for a minute."""
    olga = grant_destination_admin(world["olga"])
    pause_by_breaker("receiver", detail="refused", next_probe_in=-60)
    past = DestinationHealth.objects.get(name="receiver").next_probe_at
    page = client_for(olga).get("/health/").content.decode()
    notice = page[page.index('id="destination-paused-receiver"') :]
    assert "the next probe <span" in notice and ">(due now)</span> resumes it" in notice
    assert f"{past:%H:%M:%S} UTC" not in page
    [line] = destination_holds_now("receiver").live
    assert line.words.endswith("until a probe succeeds (probing now) · set by the breaker")


def test_the_cli_refuses_a_hold_on_a_destination_the_page_does_not_know(world):
    """The page answers 404 for a name that is no destination; the command paused or scheduled a window on
    it all the same (exit 0, a hold and a health row for a typo) while the destination meant went on
    sending. Both refuse it now, and neither writes. A pause longer than the page's year is refused too."""
    DestinationConfig.objects.create(name="crm", kind="in_process", config={})
    olga = client_for(grant_destination_admin(world["olga"]))
    assert olga.post("/destinations/crn/pause", {"reason": "crm upgrade"}).status_code == 404
    with pytest.raises(CommandError, match="nothing changed: no destination named 'crn'"):
        call_command("destinations", "pause", "crn", "--reason", "crm upgrade", stdout=StringIO())
    with pytest.raises(CommandError, match="nothing changed: no destination named 'crn'"):
        call_command(
            "destinations",
            *("window", "crn", "--from", "2099-01-01 22:00", "--to", "2099-01-01 23:00"),
            *("--reason", "database maintenance"),
            stdout=StringIO(),
        )
    assert olga.get("/destinations/crn/").status_code == 404
    with pytest.raises(CommandError, match="nothing changed: no destination named 'crn'"):
        call_command("destinations", "holds", "crn", stdout=StringIO())  # said "crn: no hold live"
    page = olga.post("/destinations/crm/pause", {"reason": "x", "minutes": "525601"})
    assert page.status_code == 422
    assert b"minutes must be a whole number from 1 to 525600" in page.content
    over_a_year = ("pause", "crm", "--reason", "x", "--minutes", "525601")
    with pytest.raises(CommandError, match="nothing changed: a pause lasts at most 525600 minutes"):
        call_command("destinations", *over_a_year, stdout=StringIO())
    assert not DestinationHold.objects.exists()
    assert not DestinationEvent.objects.exists()
    assert not DestinationHealth.objects.filter(name="crn").exists()
    # The seed's name without a row is a destination on both.
    call_command("destinations", "pause", "receiver", "--reason", "migration", stdout=StringIO())
    assert DestinationHold.objects.filter(destination="receiver").count() == 1
