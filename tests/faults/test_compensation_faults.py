"""Compensation with real processes on PostgreSQL: a three-step onboarding whose last step the receiver
refuses is compensated while the receiver (gunicorn) loses the answer to one compensation and a dispatcher
is killed with SIGKILL in the middle of the other; another dispatcher settles, and each compensation is
delivered exactly once."""

import os
import signal

import pytest
from django.db.models import Count

from approvals.management.commands.demo import ONBOARDING_STEPS
from approvals.services import request_approve
from delivery.models import ReceiverTask
from outbox.models import (
    Attempt,
    AttemptOutcome,
    CompensationState,
    FailureClass,
    Handoff,
    HandoffKind,
    HandoffState,
)
from outbox.selectors import instance_handoffs, instance_status
from outbox.services import instance_compensate
from tests.factories import ONBOARDING_PAYLOAD, make_request, three_step_onboarding_world
from tests.faults.conftest import START_DEADLINE_SECONDS
from tests.faults.test_dispatch_faults import (
    KILL_HOLD_SECONDS,
    KILL_LEASE_SECONDS,
    KILL_READ_TIMEOUT,
    run_out_lease,
    wait_until,
)

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.faults,
    pytest.mark.django_db(databases=["default", "delivery"], transaction=True),
]
S = HandoffState
INSTANCE = "onboarding:7:43:1"
CREATE, PROVISION, WELCOME = (f"{INSTANCE}:{step['name']}" for step in ONBOARDING_STEPS)
UNDO_PROVISION, UNDO_CREATE = f"{PROVISION}:compensate", f"{CREATE}:compensate"


def history(key: str) -> list[tuple[str, str, str, str]]:
    """Every move of one handoff: from, to, who or what, manual action."""
    events = Handoff.objects.get(action_key=key).events.order_by("id")
    return list(events.values_list("from_state", "to_state", "actor_label", "action"))


def reasons(key: str) -> list[str]:
    return list(
        Handoff.objects.get(action_key=key).events.order_by("id").values_list("reason", flat=True)
    )


def test_compensation_delivered_once_despite_a_lost_answer_and_a_dispatcher_killed_mid_call(
    processes,
):
    world = three_step_onboarding_world()
    # No contact e-mail: the receiver refuses the welcome pack, so step 3 fails for good.
    payload = {key: value for key, value in ONBOARDING_PAYLOAD.items() if key != "contact_email"}
    request = make_request(world["w7"], 43, world["bob"], payload=payload)
    request_approve(
        workspace_id=7,
        number=43,
        revision=1,
        actor=world["alice"],
        payload_hash=request.payload_hash,
    )
    processes.start_receiver(
        faults={
            "keys": {UNDO_PROVISION: "drop_after_commit", UNDO_CREATE: "slow"},
            "slow_seconds": KILL_HOLD_SECONDS,
        }
    )
    processes.dispatch_once("d1")
    assert [(h.action_key, h.state) for h in instance_handoffs(INSTANCE)] == [
        (CREATE, S.DELIVERED),
        (PROVISION, S.DELIVERED),
        (WELCOME, S.NEEDS_ATTENTION),
    ]
    assert Handoff.objects.get(action_key=WELCOME).failure_class == FailureClass.PERMANENT

    plan = instance_compensate(
        instance_key=INSTANCE, actor=world["olga"], reason="welcome pack cannot go out"
    )
    assert [h.action_key for h in plan.reverse] == [PROVISION, CREATE]

    # The victim sends the compensation of step 2 (the receiver commits it and drops the answer), settles it
    # by lookup, then sends the compensation of step 1, which the receiver commits and answers too slowly.
    # A lease must outlast one call (settings refuse less); the hold outlasts any stall of the test's own.
    victim = processes.start_dispatcher(
        "victim",
        HANDOFF_LEASE_SECONDS=str(KILL_LEASE_SECONDS),
        RECEIVER_READ_TIMEOUT=str(KILL_READ_TIMEOUT),
    )
    wait_until(
        lambda: (
            ReceiverTask.objects.filter(action_key=UNDO_CREATE).exists()
            and Attempt.objects.filter(
                handoff__action_key=UNDO_CREATE, outcome=AttemptOutcome.IN_PROGRESS
            ).exists()
        ),
        timeout=START_DEADLINE_SECONDS,
        what="the victim's call for the compensation of step 1",
        procs=[victim, processes.receiver],
    )
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait(timeout=10)
    assert victim.returncode == -signal.SIGKILL
    assert Handoff.objects.get(action_key=UNDO_CREATE).state == S.IN_FLIGHT
    assert Handoff.objects.get(action_key=UNDO_PROVISION).state == S.DELIVERED

    run_out_lease("victim")
    assert Handoff.objects.lease_expired().filter(action_key=UNDO_CREATE).exists()
    processes.dispatch_once("rescuer")

    # Each compensation delivered exactly once: one attempt each, the uncertain outcome settled by lookup.
    undo_provision, undo_create = (
        Handoff.objects.get(action_key=key) for key in (UNDO_PROVISION, UNDO_CREATE)
    )
    for handoff in (undo_provision, undo_create):
        assert handoff.state == S.DELIVERED
        assert handoff.kind == HandoffKind.COMPENSATION
        assert handoff.destination_id == str(
            ReceiverTask.objects.get(action_key=handoff.action_key).task_id
        )
    assert list(
        Attempt.objects.filter(handoff=undo_provision).values_list(
            "worker", "outcome", "reason_code"
        )
    ) == [("victim", AttemptOutcome.UNCERTAIN, "connection_lost")]
    assert list(
        Attempt.objects.filter(handoff=undo_create).values_list("worker", "outcome", "reason_code")
    ) == [("victim", AttemptOutcome.ABANDONED, "lease_expired")]
    assert undo_provision.compensates_id == Handoff.objects.get(action_key=PROVISION).pk
    assert undo_create.compensates_id == Handoff.objects.get(action_key=CREATE).pk

    # The receiver holds exactly one task per key: two steps and their two compensations, none for step 3.
    assert (
        not ReceiverTask.objects.values("action_key")
        .annotate(n=Count("id"))
        .filter(n__gt=1)
        .exists()
    )
    assert sorted(ReceiverTask.objects.values_list("action_key", flat=True)) == sorted(
        [CREATE, PROVISION, UNDO_PROVISION, UNDO_CREATE]
    )
    assert {t.action_key: t.payload["operation"] for t in ReceiverTask.objects.all()} == {
        CREATE: "create_client",
        PROVISION: "provision_account",
        UNDO_PROVISION: "deprovision_account",
        UNDO_CREATE: "delete_client",
    }

    # The instance is compensated, and its history tells every move of every handoff.
    handoffs = instance_handoffs(INSTANCE)
    assert [h.action_key for h in handoffs] == [
        CREATE,
        PROVISION,
        WELCOME,
        UNDO_PROVISION,
        UNDO_CREATE,
    ]
    assert instance_status(handoffs) == "compensated"
    assert {
        h.action_key: h.compensation_state for h in handoffs if h.kind == HandoffKind.ACTION
    } == {
        CREATE: CompensationState.COMPENSATED,
        PROVISION: CompensationState.COMPENSATED,
        WELCOME: "",
    }
    welcome = Handoff.objects.get(action_key=WELCOME)
    assert (welcome.state, welcome.reason_code) == (S.CANCELLED, "compensated")
    planned, compensated = (
        ("delivered", "delivered", "olga", "compensate"),
        ("delivered", "delivered", "settlement", "compensate"),
    )
    assert history(CREATE) == [
        ("", "pending", "alice", ""),
        ("pending", "in_flight", "d1", ""),
        ("in_flight", "delivered", "d1", ""),
        planned,
        compensated,
    ]
    assert history(PROVISION) == [
        ("", "pending", "d1", ""),
        ("pending", "in_flight", "d1", ""),
        ("in_flight", "delivered", "d1", ""),
        planned,
        compensated,
    ]
    assert history(WELCOME) == [
        ("", "pending", "d1", ""),
        ("pending", "in_flight", "d1", ""),
        ("in_flight", "needs_attention", "d1", ""),
        ("needs_attention", "cancelled", "olga", "compensate"),
    ]
    assert history(UNDO_PROVISION) == [
        ("", "pending", "olga", "compensate"),
        ("pending", "in_flight", "victim", ""),
        ("in_flight", "uncertain", "victim", ""),
        ("uncertain", "delivered", "settlement", ""),
    ]
    assert history(UNDO_CREATE) == [
        ("", "pending", "settlement", ""),
        ("pending", "in_flight", "victim", ""),
        ("in_flight", "uncertain", "sweep", ""),
        ("uncertain", "delivered", "settlement", ""),
    ]
    # Each compensation is recorded only once its predecessor is known to be delivered, and says what it undid.
    assert reasons(UNDO_CREATE)[0] == f"recorded when {UNDO_PROVISION} was delivered"
    assert reasons(CREATE)[-1] == f"compensated: reversed by {UNDO_CREATE}"
    assert reasons(PROVISION)[-1] == f"compensated: reversed by {UNDO_PROVISION}"
    assert reasons(UNDO_CREATE)[2] == "lease of victim expired mid-call; outcome unknown"
    for key in (UNDO_PROVISION, UNDO_CREATE):
        task_id = ReceiverTask.objects.get(action_key=key).task_id
        assert reasons(key)[-1] == f"receiver has task {task_id} for this key with the same payload"
