"""A delivered compensation marks the step it reversed, under that step's row lock. Every multi-row lock of the
outbox is taken in id order, and so must this one be: the step (lower id) before its compensation. Taken the
other way round, recording the compensation's delivery while an operator compensates the same instance (which
locks the instance's rows in id order) is a deadlock, which PostgreSQL breaks by failing one of the two."""

import threading
import time

import pytest
from django.db import OperationalError, connections, transaction

from approvals.management.commands.demo import ONBOARDING_STEPS
from approvals.services import request_approve
from outbox.destinations import InProcessDestination
from outbox.dispatch.claims import handoff_claim_due
from outbox.dispatch.dispatcher import sweep
from outbox.failures import DeliveryResult
from outbox.models import CompensationState, Handoff, HandoffState
from outbox.services.compensation import _instance_locked, instance_compensate
from outbox.services.outcomes import handoff_record_outcomes
from outbox.services.transitions import handoff_lock
from tests.factories import ONBOARDING_PAYLOAD, make_request, three_step_onboarding_world

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.django_db(databases=["default", "delivery"], transaction=True),
]
S = HandoffState
INSTANCE = "onboarding:7:43:1"
CREATE, PROVISION, WELCOME = (f"{INSTANCE}:{step['name']}" for step in ONBOARDING_STEPS)
UNDO_PROVISION = f"{PROVISION}:compensate"


@pytest.fixture
def compensating():
    """An instance whose last step the receiver refused, compensated: the compensation of step 2 is pending."""
    if connections["default"].vendor != "postgresql":
        pytest.fail("needs PostgreSQL (row locks); `make test` runs it there")
    world = three_step_onboarding_world()
    payload = {key: value for key, value in ONBOARDING_PAYLOAD.items() if key != "contact_email"}
    request = make_request(world["w7"], 43, world["bob"], payload=payload)
    request_approve(
        workspace_id=7,
        number=43,
        revision=1,
        actor=world["alice"],
        payload_hash=request.payload_hash,
    )
    sweep(destination=InProcessDestination())
    assert Handoff.objects.get(action_key=WELCOME).state == S.NEEDS_ATTENTION
    instance_compensate(
        instance_key=INSTANCE, actor=world["olga"], reason="welcome pack cannot go out"
    )
    step, undo = (
        Handoff.objects.get(action_key=PROVISION),
        Handoff.objects.get(action_key=UNDO_PROVISION),
    )
    assert step.pk < undo.pk and undo.compensates_id == step.pk
    return step, undo


def _wait_for_another_session_to_wait(seconds: float = 30) -> bool:
    deadline = time.monotonic() + seconds
    with connections["default"].cursor() as cursor:
        while time.monotonic() < deadline:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                " AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
            )
            if cursor.fetchone()[0]:
                return True
            time.sleep(0.01)
    return False


def test_recording_a_compensation_while_the_instance_is_locked_in_id_order_is_no_deadlock(
    compensating,
):
    step, undo = compensating
    [claim] = handoff_claim_due(worker="w1")
    assert claim.handoff_id == undo.pk and claim.follow_up
    held, seen, errors = threading.Event(), {}, {}

    def operator():
        """Holds the step, waits until the recorder waits, then locks the instance's rows as compensating does."""
        try:
            with transaction.atomic():
                Handoff.objects.select_for_update(no_key=True).filter(pk=step.pk).first()
                held.set()
                seen["waiting"] = _wait_for_another_session_to_wait()
                _instance_locked(INSTANCE)
        except OperationalError as exc:
            errors["operator"] = exc
        finally:
            held.set()
            connections["default"].close()

    other = threading.Thread(target=operator)
    other.start()
    assert held.wait(30)
    try:
        recorded = handoff_record_outcomes(
            outcomes=[(claim, DeliveryResult.ok(task_id="undo-2", created=True))],
            destination=InProcessDestination(),
        )
    except OperationalError as exc:
        errors["recorder"] = exc
        recorded = None
    other.join(60)
    assert seen.get("waiting"), "the recorder did not wait for the step: the race was not run"
    assert errors == {}, errors
    assert recorded.states == [S.DELIVERED]
    assert Handoff.objects.get(pk=step.pk).compensation_state == CompensationState.COMPENSATED
    assert Handoff.objects.get(pk=undo.pk).state == S.DELIVERED


def test_locking_a_compensation_locks_the_step_it_reversed_first(compensating):
    step, undo = compensating
    answer = {}

    def try_the_step():
        try:
            with transaction.atomic(), connections["default"].cursor() as cursor:
                cursor.execute(
                    "SELECT id FROM outbox_handoff WHERE id = %s FOR NO KEY UPDATE NOWAIT",
                    [step.pk],
                )
                answer["free"] = True
        except OperationalError:
            answer["free"] = False
        finally:
            connections["default"].close()

    with transaction.atomic():
        assert handoff_lock(undo.pk).pk == undo.pk
        other = threading.Thread(target=try_the_step)
        other.start()
        other.join(30)
    assert answer == {"free": False}, "the step was not locked with its compensation"
