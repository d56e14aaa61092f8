"""Holding one case with real processes (issue 39, "Hold one case"): a real `manage.py dispatch` and the
receiver under gunicorn. One held handoff waits while its destination keeps delivering the others, counted at
the receiver; resumed, it is delivered once. A workflow instance held while its second step fails: nothing of
it is sent while held, and resumed after the fix the failed step goes under its own key, the delivered first
step never again. PostgreSQL."""

import pytest

from delivery.models import ReceiverTask
from outbox.models import Attempt, Handoff, HandoffState
from outbox.services import instance_compensate
from outbox.services.case_holds import case_hold, case_resume
from outbox.services.operator import handoff_retry
from tests.builders import approve
from tests.factories import HandoffFactory, onboarding_world, three_step_onboarding_world
from tests.faults.test_dispatch_faults import wait_until

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.faults,
    pytest.mark.django_db(databases=["default", "delivery"], transaction=True),
]
S = HandoffState
DEADLINE_SECONDS = 120
INSTANCE = "onboarding:7:43:1"
CREATE, PROVISION, WELCOME = (
    f"{INSTANCE}:{step}" for step in ("create_client", "provision_account", "send_welcome_pack")
)


def _at_receiver(*keys: str) -> int:
    return ReceiverTask.objects.filter(action_key__in=keys).count()


def test_one_held_handoff_waits_while_its_destination_delivers_the_others(processes):
    world = onboarding_world()
    processes.start_receiver()
    handoffs = [HandoffFactory(number=3000 + n, destination="receiver") for n in range(6)]
    held, others = handoffs[2], [h.action_key for h in handoffs if h.pk != handoffs[2].pk]
    case_hold(
        handoff_id=held.pk, actor=world["olga"], reason="calling the client", whole_case=False
    )
    dispatcher = processes.start_dispatcher("d1")

    wait_until(
        lambda: _at_receiver(*others) == len(others),
        timeout=DEADLINE_SECONDS,
        what="the destination's other handoffs delivered",
        procs=[dispatcher],
    )
    row = Handoff.objects.get(pk=held.pk)
    assert (row.state, row.attempts, row.action_key) == (S.PENDING, 0, held.action_key)
    assert _at_receiver(held.action_key) == 0
    assert not Attempt.objects.filter(handoff=held).exists()

    case_resume(handoff_id=held.pk, actor=world["olga"], reason="the client confirmed")
    wait_until(
        lambda: Handoff.objects.filter(pk=held.pk, state=S.DELIVERED).exists(),
        timeout=DEADLINE_SECONDS,
        what="the resumed handoff delivered",
        procs=[dispatcher],
    )
    assert _at_receiver(held.action_key, *others) == len(handoffs)  # one task per key
    assert Attempt.objects.filter(handoff=held).count() == 1
    processes.stop_all()


def test_a_case_held_at_its_failed_step_resumes_there_under_the_same_keys(processes):
    world = three_step_onboarding_world()
    # The accounts step's first call is answered 503 (once for this key): it waits in a long backoff.
    processes.start_receiver(faults={"keys": {PROVISION: "http_503"}})
    dispatcher = processes.start_dispatcher(
        "d1", HANDOFF_BACKOFF_BASE="600", HANDOFF_BACKOFF_CAP="600"
    )
    first = approve(world, 43)
    wait_until(
        lambda: Handoff.objects.filter(action_key=PROVISION, state=S.PENDING, attempts=1).exists(),
        timeout=DEADLINE_SECONDS,
        what="the second step failed once and waits for its retry",
        procs=[dispatcher],
    )
    failed = Handoff.objects.get(action_key=PROVISION)
    case_hold(
        handoff_id=failed.pk, actor=world["olga"], reason="accounts being fixed", whole_case=True
    )
    # The fix is made at the accounts service (the fault fired once); run now while held: queued, not sent.
    handoff_retry(handoff_id=failed.pk, actor=world["olga"], reason="accounts fixed")
    # The dispatcher keeps serving the destination meanwhile (another handoff goes through), and sends
    # nothing of the held case, due now as it is.
    other = HandoffFactory(number=3100, destination=failed.destination)
    wait_until(
        lambda: Handoff.objects.filter(pk=other.pk, state=S.DELIVERED).exists(),
        timeout=DEADLINE_SECONDS,
        what="another handoff to the same destination delivered",
        procs=[dispatcher],
    )
    assert Handoff.objects.get(pk=failed.pk).attempts == 1
    assert _at_receiver(PROVISION, WELCOME) == 0

    case_resume(handoff_id=failed.pk, actor=world["olga"], reason="accounts fixed")
    wait_until(
        lambda: Handoff.objects.filter(instance_key=INSTANCE, state=S.DELIVERED).count() == 3,
        timeout=DEADLINE_SECONDS,
        what="the case finished after the resume",
        procs=[dispatcher],
    )
    attempts = dict(
        Handoff.objects.filter(instance_key=INSTANCE).values_list("action_key", "attempts")
    )
    assert attempts == {CREATE: 1, PROVISION: 2, WELCOME: 1}, attempts
    assert Handoff.objects.get(pk=failed.pk).action_key == failed.action_key == PROVISION
    assert first.action_key == CREATE
    for key in (CREATE, PROVISION, WELCOME):
        assert _at_receiver(key) == 1, key
    processes.stop_all()


def test_a_held_cases_compensation_reaches_the_receiver_only_after_the_release(processes):
    """Held mid-workflow (two steps delivered, the third failed once and waiting), the case is compensated:
    its third step is cancelled and nothing of the undo reaches the receiver while the case is held, though
    the dispatcher keeps delivering to that destination; released, each delivered step is undone exactly
    once. Fails on the code that held only the open rows' successors (the undo went out at once)."""
    world = three_step_onboarding_world()
    undo_provision, undo_create = f"{PROVISION}:compensate", f"{CREATE}:compensate"
    processes.start_receiver(faults={"keys": {WELCOME: "http_503"}})
    dispatcher = processes.start_dispatcher(
        "d1", HANDOFF_BACKOFF_BASE="600", HANDOFF_BACKOFF_CAP="600"
    )
    approve(world, 43)
    wait_until(
        lambda: Handoff.objects.filter(action_key=WELCOME, state=S.PENDING, attempts=1).exists(),
        timeout=DEADLINE_SECONDS,
        what="two steps delivered, the third failed once and waits for its retry",
        procs=[dispatcher],
    )
    welcome = Handoff.objects.get(action_key=WELCOME)
    case_hold(handoff_id=welcome.pk, actor=world["olga"], reason="fraud check", whole_case=True)
    instance_compensate(instance_key=INSTANCE, actor=world["olga"], reason="client withdrew")

    other = HandoffFactory(number=3200, destination=welcome.destination)
    wait_until(
        lambda: Handoff.objects.filter(pk=other.pk, state=S.DELIVERED).exists(),
        timeout=DEADLINE_SECONDS,
        what="another handoff to the same destination delivered",
        procs=[dispatcher],
    )
    assert _at_receiver(undo_provision, undo_create, WELCOME) == 0
    assert Handoff.objects.get(action_key=undo_provision).attempts == 0
    assert Handoff.objects.get(action_key=WELCOME).state == S.CANCELLED

    case_resume(handoff_id=welcome.pk, actor=world["olga"], reason="fraud check passed")
    wait_until(
        lambda: (
            Handoff.objects.filter(
                action_key__in=[undo_provision, undo_create], state=S.DELIVERED
            ).count()
            == 2
        ),
        timeout=DEADLINE_SECONDS,
        what="both delivered steps undone after the release",
        procs=[dispatcher],
    )
    for key in (CREATE, PROVISION, undo_provision, undo_create):
        assert _at_receiver(key) == 1, key
    assert _at_receiver(WELCOME) == 0
    attempts = dict(
        Handoff.objects.filter(action_key__in=[undo_provision, undo_create]).values_list(
            "action_key", "attempts"
        )
    )
    assert attempts == {undo_provision: 1, undo_create: 1}, attempts
    processes.stop_all()
