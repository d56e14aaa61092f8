"""Faults with real processes on PostgreSQL: the receiver under gunicorn with injected faults, dispatchers
as separate processes, one of them killed with SIGKILL mid-call."""

import json
import os
import signal
import time
from collections import Counter
from pathlib import Path

import pytest
from django.db.models import Count

from delivery.models import ReceiverTask, SeenMessage
from outbox.clock import db_now, db_now_plus
from outbox.models import Attempt, AttemptOutcome, FailureClass, Handoff, HandoffState
from outbox.payloads import payload_hash
from tests.faults.conftest import START_DEADLINE_SECONDS

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.faults,
    pytest.mark.django_db(databases=["default", "delivery"], transaction=True),
]
S = HandoffState
OPEN = (S.PENDING, S.IN_FLIGHT, S.UNCERTAIN)
# A victim killed mid-call: the receiver holds its committed answer and the victim waits for it this long,
# so that the test's kill comes while the call is out even when a loaded machine holds the test back for
# many seconds (a 4 s hold was all the test had to see the call and kill). A lease outlasts one call
# (connect 2 s + read); the killed victim's lease is then run out on the database clock (`run_out_lease`).
KILL_READ_TIMEOUT = 30
KILL_HOLD_SECONDS = KILL_READ_TIMEOUT + 2
KILL_LEASE_SECONDS = KILL_READ_TIMEOUT + 5


def make_handoffs(count: int, workspace_id: int = 7) -> list[str]:
    rows = []
    for n in range(1, count + 1):
        payload = {"client_name": f"Client {n}", "plan": "standard"}
        rows.append(
            Handoff(
                action_key=f"onboarding:{workspace_id}:{n}:1",
                workflow="onboarding",
                workspace_id=workspace_id,
                source_ref=f"request {n} revision 1",
                source_id=n,
                payload=payload,
                payload_hash=payload_hash(payload),
                state=S.PENDING,
                next_attempt_at=db_now(),
            )
        )
    Handoff.objects.bulk_create(rows, batch_size=1000)
    return [row.action_key for row in rows]


def run_out_lease(worker: str) -> None:
    """The leases of a worker killed with SIGKILL (and reaped) run out now, on the database clock. They could
    only run out by themselves, later: the test spares itself that wait, not a step of the product's (the next
    dispatcher finds them expired and settles them as it would after the wait)."""
    assert Handoff.objects.filter(lease_owner=worker).update(lease_expires_at=db_now_plus(-1))


def wait_until(predicate, *, timeout: float, what: str, procs=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    logs = ""
    for proc in procs or []:
        logs += f"\n--- {proc.log_path.name} ---\n" + proc.log_path.read_text()[-2000:]
    raise AssertionError(f"timed out waiting for {what}{logs}")


def test_lost_response_after_receiver_commits_ends_delivered_with_the_one_task(processes):
    [key] = make_handoffs(1)
    processes.start_receiver(faults={"keys": {key: "drop_after_commit"}})
    processes.dispatch_once("d1")

    handoff = Handoff.objects.get(action_key=key)
    task = ReceiverTask.objects.get(action_key=key)
    assert ReceiverTask.objects.count() == 1
    assert handoff.state == S.DELIVERED
    assert handoff.destination_id == str(task.task_id)
    first = Attempt.objects.get(handoff=handoff, number=1)
    assert (first.outcome, first.failure_class, first.reason_code) == (
        AttemptOutcome.UNCERTAIN,
        FailureClass.UNCERTAIN,
        "connection_lost",
    )
    assert handoff.attempt_set.count() == 1, "settled by lookup, not by sending again"
    assert handoff.events.filter(from_state=S.UNCERTAIN, to_state=S.DELIVERED).exists()


def test_dispatcher_killed_mid_call_then_another_settles_without_a_duplicate(processes):
    [key] = make_handoffs(1)
    processes.start_receiver(faults={"keys": {key: "slow"}, "slow_seconds": KILL_HOLD_SECONDS})
    victim = processes.start_dispatcher(
        "victim",
        HANDOFF_LEASE_SECONDS=str(KILL_LEASE_SECONDS),
        RECEIVER_READ_TIMEOUT=str(KILL_READ_TIMEOUT),
    )
    # The receiver has committed the task and is still answering: the victim is in its call.
    wait_until(
        lambda: (
            ReceiverTask.objects.filter(action_key=key).exists()
            and Attempt.objects.filter(outcome=AttemptOutcome.IN_PROGRESS).exists()
        ),
        timeout=START_DEADLINE_SECONDS,
        what="the victim's call to reach the receiver",
        procs=[victim],
    )
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait(timeout=10)
    assert victim.returncode == -signal.SIGKILL
    assert Handoff.objects.get(action_key=key).state == S.IN_FLIGHT

    run_out_lease("victim")
    assert Handoff.objects.lease_expired().filter(action_key=key).exists()
    processes.dispatch_once("rescuer")

    handoff = Handoff.objects.get(action_key=key)
    assert ReceiverTask.objects.count() == 1
    assert handoff.state == S.DELIVERED
    assert handoff.destination_id == str(ReceiverTask.objects.get().task_id)
    attempt = Attempt.objects.get(handoff=handoff)
    assert (attempt.worker, attempt.outcome, attempt.reason_code) == (
        "victim",
        AttemptOutcome.ABANDONED,
        "lease_expired",
    )
    assert list(handoff.events.order_by("id").values_list("to_state", flat=True)) == [
        S.IN_FLIGHT,
        S.UNCERTAIN,
        S.DELIVERED,
    ]


def test_wrong_signing_secret_pauses_the_destination_with_one_alert_and_no_retry_storm(
    processes, settings
):
    from incidents.models import Incident, IncidentKind, Notification
    from incidents.sweep import alerts_send_due
    from outbox.models import DestinationHealth, DestinationState, PauseReason

    settings.ALERT_EMAILS = ["oncall@example.com"]
    keys = make_handoffs(20)
    processes.start_receiver()
    wrong = "whsec_" + "d3Jvbmctc2VjcmV0LXdyb25nLXNlY3JldC13cm9uZyE="
    no_probe = {"HANDOFF_BREAKER_PROBE_BASE": "3600", "HANDOFF_BREAKER_PROBE_CAP": "3600"}
    processes.dispatch_once("d1", RECEIVER_SIGNING_SECRET=wrong, **no_probe)
    processes.dispatch_once("d1", RECEIVER_SIGNING_SECRET=wrong, **no_probe)
    alerts_send_due()
    alerts_send_due()

    health = DestinationHealth.objects.get(name="receiver")
    assert (health.state, health.pause_reason) == (DestinationState.PAUSED, PauseReason.CREDENTIAL)
    handoffs = Handoff.objects.filter(action_key__in=keys)
    sent = Attempt.objects.exclude(outcome=AttemptOutcome.SKIPPED)
    assert sent.count() <= 2, "a handful of refused calls, not one per handoff"
    assert set(handoffs.values_list("attempts_in_run", flat=True)) == {0}, "no retry budget spent"
    assert not handoffs.filter(state=S.NEEDS_ATTENTION).exists()
    [incident] = Incident.objects.filter(kind=IncidentKind.DESTINATION)
    assert Notification.objects.filter(incident=incident, event="trigger").count() == 1
    assert ReceiverTask.objects.count() == 0
    assert SeenMessage.objects.count() == 0

    # The secret is fixed: the next probe succeeds, the destination resumes and everything is delivered.
    DestinationHealth.objects.filter(name="receiver").update(next_probe_at=db_now())
    processes.dispatch_once("d1")
    assert DestinationHealth.objects.get(name="receiver").state == DestinationState.ACTIVE
    assert set(handoffs.values_list("state", flat=True)) == {S.DELIVERED}
    assert ReceiverTask.objects.count() == 20


@pytest.mark.long
def test_four_dispatchers_two_thousand_handoffs_mixed_faults_end_delivered_once_or_with_a_person(
    processes,
):
    keys = make_handoffs(2000)
    processes.start_receiver(
        faults={
            "fraction": 0.10,
            "seed": 20261130,
            "kinds": [
                "drop_after_commit",
                "slow",
                "malformed",
                "http_500",
                "http_503",
                "http_429",
                "http_401",
            ],
            "slow_seconds": 2,
            "retry_after": 1,
        },
        threads=24,
    )
    started = time.monotonic()
    dispatchers = [
        processes.start_dispatcher(f"d{n}", RECEIVER_READ_TIMEOUT="1") for n in range(1, 5)
    ]
    wait_until(
        lambda: not Handoff.objects.filter(state__in=OPEN).exists(),
        timeout=420,
        what="every handoff to settle",
        procs=dispatchers,
    )
    elapsed = time.monotonic() - started
    processes.stop_all()

    states = Counter(Handoff.objects.values_list("state", flat=True))
    assert set(states) <= {S.DELIVERED, S.NEEDS_ATTENTION}, states
    assert sum(states.values()) == len(keys)

    tasks = {
        key: (str(tid), digest)
        for key, tid, digest in ReceiverTask.objects.values_list(
            "action_key", "task_id", "payload_hash"
        )
    }
    duplicates = ReceiverTask.objects.values("action_key").annotate(n=Count("id")).filter(n__gt=1)
    assert not duplicates.exists()
    assert set(tasks) <= set(keys), "no task without a handoff"
    for key, destination_id, digest in Handoff.objects.filter(state=S.DELIVERED).values_list(
        "action_key", "destination_id", "payload_hash"
    ):
        assert tasks[key] == (destination_id, digest), key
    attention = Handoff.objects.filter(state=S.NEEDS_ATTENTION)
    for handoff in attention:
        assert handoff.failure_class and handoff.reason_code and handoff.last_error, (
            handoff.action_key
        )
        assert (
            handoff.attempt_set.exists()
            and handoff.events.filter(to_state=S.NEEDS_ATTENTION).exists()
        )
    # Every kind of fault was really injected and met.
    reasons = Counter(Attempt.objects.exclude(reason_code="").values_list("reason_code", flat=True))
    for code in (
        "connection_lost",
        "read_timeout",
        "malformed_receipt",
        "http_500",
        "http_503",
        "rate_limited",
        "credential_rejected",
    ):
        assert reasons[code] > 0, (code, reasons)
    outcomes = Counter(Attempt.objects.values_list("outcome", flat=True))
    assert outcomes[AttemptOutcome.IN_PROGRESS] == 0

    summary = {
        "handoffs": len(keys),
        "dispatchers": 4,
        "seconds": round(elapsed, 1),
        "final_states": dict(states),
        "receiver_tasks": len(tasks),
        "duplicate_tasks": duplicates.count(),
        "attempts_by_outcome": dict(outcomes),
        "failure_reasons": dict(reasons),
        "needs_attention_by_class": dict(
            Counter(attention.values_list("failure_class", flat=True))
        ),
    }
    artifacts = Path(__file__).resolve().parents[2] / "test-artifacts"
    artifacts.mkdir(exist_ok=True)
    (artifacts / "four-dispatchers-summary.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps(summary))
