"""The django-q2 path with real processes on PostgreSQL: the receiver under gunicorn and `manage.py qcluster`.

No `manage.py dispatch` runs here: whatever is delivered, the cluster delivered, woken either by the task
an approval queues after commit or by the sweep that `schedule_sweeps` installs."""

import pytest
from django_q.models import OrmQ, Schedule, Task

from approvals.services import request_approve
from delivery.models import ReceiverTask
from outbox.models import Handoff, HandoffState
from outbox.services.destination_configs import destination_configs_apply
from tests.factories import onboarding_world
from tests.faults.test_dispatch_faults import wait_until
from tests.outbox.destinations.work_status_server import AccountsProcess
from tests.outbox.services.test_work_pull import PULLED, TOKEN_ENV, accounts_entry, delivered_to

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.faults,
    pytest.mark.django_db(databases=["default", "delivery"], transaction=True),
]


def approve_request_42() -> Handoff:
    world = onboarding_world()
    request = world["request"]
    return request_approve(
        workspace_id=7,
        number=42,
        revision=1,
        actor=world["alice"],
        payload_hash=request.payload_hash,
    )


def assert_delivered_once(handoff: Handoff) -> None:
    handoff.refresh_from_db()
    task = ReceiverTask.objects.get(action_key=handoff.action_key)
    assert handoff.state == HandoffState.DELIVERED
    assert handoff.destination_id == str(task.task_id)
    assert ReceiverTask.objects.count() == 1
    assert handoff.attempt_set.count() == 1


def test_approval_is_delivered_by_the_qcluster_woken_on_commit(processes, settings):
    settings.HANDOFF_WAKE_ON_COMMIT = True
    processes.start_receiver()
    cluster = processes.start_qcluster(HANDOFF_WAKE_ON_COMMIT="1")

    handoff = approve_request_42()
    assert OrmQ.objects.exists(), "the approval's commit queued a wake-up for the cluster"

    wait_until(
        lambda: Handoff.objects.filter(pk=handoff.pk, state=HandoffState.DELIVERED).exists(),
        timeout=60,
        what="the cluster to deliver the approved handoff",
        procs=[cluster],
    )
    assert_delivered_once(handoff)
    assert not Schedule.objects.exists(), "nothing but the wake-up could have delivered it"
    wait_until(
        lambda: Task.objects.filter(func="outbox.tasks.dispatch_due", success=True).exists(),
        timeout=120,
        what="the cluster to record the dispatch task",
        procs=[cluster],
    )
    assert cluster.poll() is None


def test_schedule_sweeps_installs_the_sweep_and_the_work_pull_every_minute_idempotently(
    processes,
):
    processes.manage("schedule_sweeps")
    processes.manage("schedule_sweeps")

    schedules = Schedule.objects.order_by("name").values_list(
        "name", "func", "schedule_type", "minutes", "repeats"
    )
    assert list(schedules) == [
        ("outbox-sweep", "outbox.tasks.sweep", Schedule.MINUTES, 1, -1),
        ("work-status-pull", "outbox.tasks.work_status_pull", Schedule.MINUTES, 1, -1),
    ]


def test_scheduled_sweep_delivers_a_handoff_whose_wake_up_was_lost(processes, settings):
    settings.HANDOFF_WAKE_ON_COMMIT = (
        False  # the wake-up is lost: only the schedule can find the row
    )
    processes.start_receiver()
    processes.manage("schedule_sweeps")
    handoff = approve_request_42()
    assert not OrmQ.objects.exists()

    # A 30 s guard cycle makes django-q2 run its scheduler as the cluster starts (see config/test_settings).
    cluster = processes.start_qcluster(HANDOFF_WAKE_ON_COMMIT="0", Q_GUARD_CYCLE="30")
    wait_until(
        lambda: Handoff.objects.filter(pk=handoff.pk, state=HandoffState.DELIVERED).exists(),
        timeout=60,
        what="the scheduled sweep to deliver the handoff",
        procs=[cluster],
    )
    assert_delivered_once(handoff)
    wait_until(
        lambda: Task.objects.filter(func="outbox.tasks.sweep", success=True).exists(),
        timeout=120,
        what="the cluster to record the sweep task",
        procs=[cluster],
    )
    assert not Task.objects.filter(func="outbox.tasks.dispatch_due").exists()
    assert cluster.poll() is None


def test_the_cluster_reads_a_pulled_work_status_woken_by_the_delivery_without_a_schedule(
    processes, settings, monkeypatch
):
    """No minute schedule is installed: the delivery to a pulled destination asked for a pull
    `every_seconds` later, and the cluster's scheduler ran it."""
    settings.HANDOFF_WAKE_ON_COMMIT = True
    monkeypatch.setenv(TOKEN_ENV, "work-status-token")
    accounts = AccountsProcess()
    try:
        entry = accounts_entry(accounts.url, {**PULLED, "every_seconds": 5})
        destination_configs_apply(document={"destinations": [entry]}, actor_label="test")
        handoff = delivered_to("accounts", 80)
        accounts.set_status(handoff.destination_id, "active")
        assert list(Schedule.objects.values_list("name", flat=True)) == ["work-status-pull-soon"]

        # A 30 s guard cycle: the scheduler runs as the cluster starts, then every 30 s.
        cluster = processes.start_qcluster(
            HANDOFF_WAKE_ON_COMMIT="1", Q_GUARD_CYCLE="30", **{TOKEN_ENV: "work-status-token"}
        )
        wait_until(
            lambda: Handoff.objects.filter(pk=handoff.pk, work_status="done").exists(),
            timeout=90,
            what="the woken pull to read the account active",
            procs=[cluster],
        )
        assert accounts.reads() == {handoff.destination_id: 1}
    finally:
        accounts.stop()
