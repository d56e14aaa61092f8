"""An operator holds one case (issue 39, "Hold one case"): nothing of it is claimed while held, its key and
approval untouched, who and why recorded; a step recorded while its whole case is held is held too; resumed,
the dispatcher goes on where it stopped, a delivered step never sent again. Both backends."""

from datetime import timedelta

import pytest

from approvals.services import request_approve
from outbox.clock import db_now_plus, db_time
from outbox.destinations import InProcessDestination
from outbox.dispatch.claims import handoff_claim_due
from outbox.dispatch.dispatcher import sweep
from outbox.errors import CaseHoldRefused, InvalidActionInput, ReasonRequired
from outbox.failures import DeliveryResult
from outbox.models import CaseHold, Handoff, HandoffEvent, HandoffKind, HandoffState
from outbox.services import instance_compensate
from outbox.services.case_holds import case_hold, case_holds_expire, case_resume
from outbox.services.outcomes import handoff_record_outcomes
from tests.builders import record
from tests.factories import make_request, onboarding_world, three_step_onboarding_world

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
S = HandoffState
INSTANCE = "onboarding:7:43:1"
CREATE, PROVISION, WELCOME = (
    f"{INSTANCE}:{step}" for step in ("create_client", "provision_account", "send_welcome_pack")
)


@pytest.fixture
def world():
    return onboarding_world()


def _claimed_keys() -> set[str]:
    return {claim.action_key for claim in handoff_claim_due(worker="w1", limit=50)}


def test_a_held_handoff_is_not_claimed_while_the_others_are(world):
    held, other = record(501), record(502)
    hold = case_hold(
        handoff_id=held.pk, actor=world["olga"], reason="calling ACME", whole_case=False
    )

    assert _claimed_keys() == {other.action_key}
    row = Handoff.objects.get(pk=held.pk)
    assert (row.state, row.action_key, row.payload_hash) == (
        S.PENDING,
        held.action_key,
        held.payload_hash,
    )
    assert row.case_hold_id == hold.pk and row.attempts == 0
    event = HandoffEvent.objects.filter(handoff=held, action="hold").get()
    assert (event.actor, event.reason) == (
        world["olga"],
        "held until resumed: calling ACME",
    )

    case_resume(handoff_id=held.pk, actor=world["olga"], reason="ACME called back")
    assert _claimed_keys() == {held.action_key}
    hold.refresh_from_db()
    assert hold.ended_by == "olga" and hold.end_reason == "ACME called back"
    assert HandoffEvent.objects.filter(handoff=held, action="resume").get().actor == world["olga"]


def test_a_hold_needs_a_reason_a_future_end_and_something_left_to_send(world):
    olga, handoff = world["olga"], record(503)
    with pytest.raises(ReasonRequired):
        case_hold(handoff_id=handoff.pk, actor=olga, reason=" ", whole_case=False)
    with pytest.raises(InvalidActionInput, match="until"):
        case_hold(handoff_id=handoff.pk, actor=olga, reason="x", until=db_time(), whole_case=False)
    case_hold(handoff_id=handoff.pk, actor=olga, reason="x", whole_case=False)
    with pytest.raises(CaseHoldRefused, match="held already"):
        case_hold(handoff_id=handoff.pk, actor=olga, reason="again", whole_case=False)
    case_resume(handoff_id=handoff.pk, actor=olga)
    with pytest.raises(CaseHoldRefused, match="not held"):
        case_resume(handoff_id=handoff.pk, actor=olga)
    Handoff.objects.filter(pk=handoff.pk).update(state=S.DELIVERED)
    with pytest.raises(CaseHoldRefused, match="nothing of this case"):
        case_hold(handoff_id=handoff.pk, actor=olga, reason="late", whole_case=False)
    assert CaseHold.objects.count() == 1


def test_a_step_recorded_while_its_case_is_held_is_held_and_resume_sends_only_the_rest():
    world = three_step_onboarding_world()
    request = make_request(world["w7"], 43, world["bob"])
    request_approve(
        workspace_id=7,
        number=43,
        revision=1,
        actor=world["alice"],
        payload_hash=request.payload_hash,
    )
    [claim] = handoff_claim_due(worker="w1")
    assert claim.action_key == CREATE
    # Held while its first step is in flight: the call under way finishes, the next step waits.
    case_hold(
        handoff_id=claim.handoff_id,
        actor=world["olga"],
        reason="contract in review",
        whole_case=True,
    )
    handoff_record_outcomes(
        outcomes=[(claim, DeliveryResult.ok(task_id="t-1", created=True))],
        destination=InProcessDestination(),
    )
    provision = Handoff.objects.get(action_key=PROVISION)
    assert provision.state == S.PENDING and provision.is_held
    sweep(destination=InProcessDestination())
    assert Handoff.objects.get(action_key=PROVISION).attempts == 0

    case_resume(handoff_id=provision.pk, actor=world["olga"], reason="contract signed")
    sweep(destination=InProcessDestination())
    states = dict(Handoff.objects.filter(instance_key=INSTANCE).values_list("action_key", "state"))
    assert states == {CREATE: S.DELIVERED, PROVISION: S.DELIVERED, WELCOME: S.DELIVERED}
    # The delivered first step was never sent again; each later step sent once, under its own key.
    attempts = dict(
        Handoff.objects.filter(instance_key=INSTANCE).values_list("action_key", "attempts")
    )
    assert attempts == {CREATE: 1, PROVISION: 1, WELCOME: 1}


def test_a_hold_ends_by_itself_when_its_end_passes(world):
    handoff = record(504)
    hold = case_hold(
        handoff_id=handoff.pk,
        actor=world["olga"],
        reason="until the customer's cut-over",
        until=db_time() + timedelta(hours=1),
        whole_case=False,
    )
    assert case_holds_expire() == 0 and _claimed_keys() == set()
    CaseHold.objects.filter(pk=hold.pk).update(ends_at=db_now_plus(-1))
    assert case_holds_expire() == 1
    assert _claimed_keys() == {handoff.action_key}
    hold.refresh_from_db()
    assert hold.ended_by == "case hold sweep" and hold.end_reason == "its end passed"


def test_the_periodic_sweep_ends_a_hold_whose_end_passed(world):
    """Fails on the code that ended case holds only in the runner's supervision and `maintain`: with only the
    django-q2 cluster running (or `dispatch --once`), `sweep` left the case held past its end."""
    handoff = record(505)
    hold = case_hold(
        handoff_id=handoff.pk,
        actor=world["olga"],
        reason="until the customer's cut-over",
        until=db_time() + timedelta(hours=1),
        whole_case=False,
    )
    CaseHold.objects.filter(pk=hold.pk).update(ends_at=db_now_plus(-1))
    sweep(destination=InProcessDestination())
    assert Handoff.objects.get(pk=handoff.pk).state == S.DELIVERED


def test_a_held_cases_compensation_waits_for_the_release_then_undoes_once():
    """Fails on the code that held only the case's open rows' successors: the compensation recorded after a
    delivered (never marked) step escaped the hold and was sent while the case was held."""
    world = three_step_onboarding_world()
    request = make_request(world["w7"], 43, world["bob"])
    request_approve(
        workspace_id=7,
        number=43,
        revision=1,
        actor=world["alice"],
        payload_hash=request.payload_hash,
    )
    [claim] = handoff_claim_due(worker="w1")
    handoff_record_outcomes(
        outcomes=[(claim, DeliveryResult.ok(task_id="t-1", created=True))],
        destination=InProcessDestination(),
    )
    provision = Handoff.objects.get(action_key=PROVISION)
    case_hold(handoff_id=provision.pk, actor=world["olga"], reason="fraud check", whole_case=True)
    instance_compensate(instance_key=INSTANCE, actor=world["olga"], reason="client withdrew")

    undo = Handoff.objects.get(instance_key=INSTANCE, kind=HandoffKind.COMPENSATION)
    assert undo.is_held and undo.compensates_id == claim.handoff_id
    sweep(destination=InProcessDestination())
    assert Handoff.objects.get(pk=undo.pk).attempts == 0
    assert Handoff.objects.get(action_key=PROVISION).state == S.CANCELLED

    case_resume(handoff_id=provision.pk, actor=world["olga"], reason="fraud check passed")
    sweep(destination=InProcessDestination())
    undos = Handoff.objects.filter(instance_key=INSTANCE, kind=HandoffKind.COMPENSATION)
    assert [(u.pk, u.state, u.attempts) for u in undos] == [(undo.pk, S.DELIVERED, 1)]


def test_resume_moves_a_retry_time_that_fell_inside_the_hold_to_the_release(world):
    """Fails on the code that left the old backoff time: a retry that came due while held kept its old
    place; one whose time is after the release keeps that time."""
    inside, after = record(507), record(508)
    for handoff in (inside, after):
        case_hold(handoff_id=handoff.pk, actor=world["olga"], reason="checking", whole_case=False)
    # Failed once before the hold: the first retry time passed while held, the second is still ahead.
    Handoff.objects.filter(pk=inside.pk).update(attempts=1, next_attempt_at=db_now_plus(-600))
    Handoff.objects.filter(pk=after.pk).update(attempts=1, next_attempt_at=db_now_plus(3600))
    later = Handoff.objects.get(pk=after.pk).next_attempt_at
    before_release = db_time()

    for handoff in (inside, after):
        case_resume(handoff_id=handoff.pk, actor=world["olga"], reason="checked")

    assert Handoff.objects.get(pk=inside.pk).next_attempt_at >= before_release
    assert Handoff.objects.get(pk=after.pk).next_attempt_at == later
    assert _claimed_keys() == {inside.action_key}
