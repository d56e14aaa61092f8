"""Retention x destination holds: a destination answering Retry-After writes a hold an episode, and nothing
deleted one, so the table grew for ever. The retention run (the operator's `manage.py archive_settled`)
deletes the holds that stopped holding before the retention age, and only those: a live pause, a window
ahead, a hold ended within the age stay (both backends)."""

from io import StringIO

import pytest
from django.core.management import call_command

from outbox.clock import DbNow
from outbox.models import DestinationHold, HoldKind

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])

DAY = 86400.0


def hold(kind: str, *, began_days: float, ends_days: float | None, ended_days: float | None = None):
    """A hold of `receiver` begun `began_days` ago, its end `ends_days` ago (negative: ahead; None: none),
    ended early `ended_days` ago (None: not)."""
    return DestinationHold.objects.create(
        destination="receiver",
        kind=kind,
        reason="test",
        starts_at=DbNow(-DAY * began_days),
        ends_at=None if ends_days is None else DbNow(-DAY * ends_days),
        ended_at=None if ended_days is None else DbNow(-DAY * ended_days),
    )


def test_the_retention_run_prunes_only_the_holds_that_ended_before_the_retention_age(settings):
    settings.HANDOFF_RETENTION_DAYS = 30
    gone = [
        hold(HoldKind.RETRY_AFTER, began_days=41, ends_days=40),  # its end passed, never closed
        hold(HoldKind.RETRY_AFTER, began_days=41, ends_days=40, ended_days=40),
        hold(HoldKind.OPERATOR_PAUSE, began_days=60, ends_days=None, ended_days=31),  # resumed
        hold(HoldKind.WINDOW, began_days=50, ends_days=20, ended_days=45),  # cancelled early
    ]
    kept = [
        hold(HoldKind.OPERATOR_PAUSE, began_days=60, ends_days=None),  # live, until resumed
        hold(HoldKind.BREAKER, began_days=60, ends_days=None),  # live, until a probe succeeds
        hold(HoldKind.WINDOW, began_days=50, ends_days=20),  # ended within the age
        hold(HoldKind.WINDOW, began_days=-1, ends_days=-2),  # ahead
    ]

    out = StringIO()
    call_command("archive_settled", "--dry-run", stdout=out)
    assert "would prune 4 destination hold(s)" in out.getvalue()
    assert DestinationHold.objects.count() == 8

    out = StringIO()
    call_command("archive_settled", stdout=out)
    assert "pruned 4 destination hold(s) ended before the retention age" in out.getvalue()
    assert set(DestinationHold.objects.values_list("pk", flat=True)) == {h.pk for h in kept}
    assert not DestinationHold.objects.filter(pk__in=[h.pk for h in gone]).exists()

    out = StringIO()
    call_command("archive_settled", stdout=out)
    assert "pruned 0 destination hold(s)" in out.getvalue()
