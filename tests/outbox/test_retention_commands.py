"""Retention's ways in: `manage.py archive_settled` (dry run, batch size), the django-q2 task and its schedule,
and `manage.py export_archive` (one workspace, a time range, csv or jsonl, redacted)."""

import csv
import io
import json
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.db.models import F
from django_q.models import Schedule

from outbox import tasks
from outbox.clock import db_time
from outbox.models import (
    ArchivedHandoff,
    DestinationHold,
    Handoff,
    HandoffEvent,
    HandoffState,
    HoldKind,
)
from tests.factories import HandoffFactory

pytestmark = pytest.mark.django_db


def settled_old(n: int, workspace_id: int = 7) -> Handoff:
    handoff = HandoffFactory(
        number=n, workspace_id=workspace_id, state=HandoffState.DELIVERED, destination_id=f"t-{n}"
    )
    Handoff.objects.filter(pk=handoff.pk).update(updated_at=F("updated_at") - timedelta(days=40))
    return handoff


def run(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def test_archive_settled_dry_run_says_what_would_move_and_moves_nothing():
    settled_old(1), settled_old(2)

    assert "would archive 2 handoff(s)" in run("archive_settled", "--dry-run")
    assert Handoff.objects.count() == 2 and not ArchivedHandoff.objects.exists()

    assert "archived 2 handoff(s) in 1 batch(es)" in run("archive_settled", "--batch-size", "5")
    assert Handoff.objects.count() == 0


@pytest.mark.parametrize("value", ["0", "10001"])
def test_archive_settled_refuses_a_batch_size_out_of_range(value):
    with pytest.raises(CommandError, match="--batch-size"):
        run("archive_settled", "--batch-size", value)


def test_the_scheduled_task_archives_and_its_schedule_is_installed_once():
    """Fails on the old code: the task's result did not say how many destination holds it pruned."""
    settled_old(1)
    now = db_time()
    for days in (40, 1):  # a Retry-After wait that ended 40 days ago goes, yesterday's stays
        DestinationHold.objects.create(
            destination="receiver",
            kind=HoldKind.RETRY_AFTER,
            reason="429",
            starts_at=now - timedelta(days=days, minutes=1),
            ends_at=now - timedelta(days=days),
        )
    run("schedule_retention")
    run("schedule_retention")

    schedule = Schedule.objects.get()
    assert (schedule.name, schedule.func, schedule.repeats) == (
        "outbox-retention",
        "outbox.tasks.archive_settled",
        -1,
    )
    result = tasks.archive_settled()
    assert (result["archived"], result["holds_pruned"]) == (1, 1)
    assert ArchivedHandoff.objects.count() == 1
    assert DestinationHold.objects.get().ends_at == now - timedelta(days=1)


@pytest.fixture
def archive():
    mine = settled_old(1)
    HandoffEvent.objects.create(
        handoff=mine, to_state="delivered", actor_label="dispatcher", reason="Bearer sk_live_xyz987"
    )
    settled_old(2, workspace_id=8)
    run("archive_settled")
    return mine


def test_export_jsonl_holds_one_workspace_only_redacted(archive):
    out = run("export_archive", "--workspace", "7", "--format", "jsonl")

    rows = [json.loads(line) for line in out.splitlines()]
    assert [r["action_key"] for r in rows] == [archive.action_key]
    assert rows[0]["final_state"] == "delivered" and rows[0]["task_id"] == "t-1"
    assert "sk_live_xyz987" not in out
    assert rows[0]["history"]["events"][0]["to"] == "delivered"


def test_export_csv_with_a_time_range(archive):
    out = run("export_archive", "--workspace", "7", "--format", "csv", "--since", "2000-01-01")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [r["action_key"] for r in rows] == [archive.action_key]

    empty = run("export_archive", "--workspace", "7", "--format", "csv", "--until", "2000-01-01")
    assert len(list(csv.DictReader(io.StringIO(empty)))) == 0


@pytest.mark.parametrize(
    "args", [("--since", "yesterday"), ("--since", "2026-02-01", "--until", "2026-01-01")]
)
def test_export_refuses_bad_dates(args):
    with pytest.raises(CommandError):
        run("export_archive", "--workspace", "7", *args)
