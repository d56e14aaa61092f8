"""A Hypothesis state machine over three-step onboarding instances: approve, dispatch, a lost
acknowledgement, a worker that crashes mid-call (and one that reports after its lease was taken), an
operator's retry, reconciliation, cancel, compensate and the manual repair of a residual, in any order.

After every rule: one receiver task per key, and a delivered handoff carries that task's id; no step is
recorded before its predecessor was delivered; compensation only of delivered steps, latest first, each
recorded after the one before it was delivered. At the end, once the dispatcher and the sweep have run,
every instance is complete, compensated, cancelled, or in front of a person with the reason visible.

Real services and the in-process receiver, every write committed, both backends. The rows of both
databases are cleared at the start of each example (the users, workspaces and rules are kept).

Its strength is the PostgreSQL run's (the long oracle stream of `make test`): 40 new random examples each run,
on the database a deployment runs. SQLite's copy (the SQLite web half, by design: the embedded default's claim
goes through the ORM) runs the same machine with 12: each of them still draws its 25 steps from every rule,
enough for the other backend's paths; SQLite's 40 were a fifth of that half's CPU (docs/testing.md, "The
state machine's examples by backend").

A later step (its predecessors delivered) cannot be cancelled on its own: the workflow is compensated
instead, which cancels what was not sent and reverses what was."""

import pytest
from django.db import connections
from django.db.backends.signals import connection_created
from django.db.models import Count
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from approvals.management.commands.demo import ONBOARDING_STEPS
from approvals.models import Approval, Request
from approvals.services import request_approve
from delivery.models import ReceiverTask, SeenMessage
from outbox.clock import db_now_plus
from outbox.destinations import InProcessDestination
from outbox.dispatch.dispatcher import dispatch_batch, drain, sweep
from outbox.errors import CompensationBlocked, LeaseLost, RiskNotConfirmed
from outbox.models import (
    NEEDS_PERSON_STATES,
    CompensationState,
    DestinationEvent,
    DestinationHealth,
    FailureClass,
    Handoff,
    HandoffEvent,
    HandoffKind,
    HandoffState,
)
from outbox.selectors import instance_handoffs, instance_status
from outbox.services import (
    handoff_cancel,
    handoff_claim_due,
    handoff_expire_leases,
    handoff_record_outcome,
    handoff_residual_repaired,
    handoff_retry,
    handoff_settle,
    instance_compensate,
)
from outbox.steps import OPERATION_FIELD, compensation_key
from tests.factories import ONBOARDING_PAYLOAD, make_request, three_step_onboarding_world

pytestmark = pytest.mark.django_db(databases=["default", "delivery"], transaction=True)
S = HandoffState
C = CompensationState
# Request numbers of workspace 7 the machine may approve (42 is the world's own request, left alone).
NUMBERS = (51, 52, 53)
# Where an instance may end: done (or delivered with the work still with the receiver's people), reversed,
# cancelled, or in front of a person.
ENDINGS = {"complete", "delivered, work not done yet", "compensated", "cancelled", "needs a person"}
UNKNOWN_OUTCOME = (FailureClass.UNCERTAIN, FailureClass.MALFORMED)
# Valid examples a run, by the default database's backend (the module's docstring says why they differ).
EXAMPLES = {"postgresql": 40, "sqlite": 12}


def instance_key(number: int) -> str:
    return f"onboarding:7:{number}:1"


def receiver() -> InProcessDestination:
    return InProcessDestination()


def clear_both_databases() -> None:
    HandoffEvent.objects.all().delete()
    # A compensation protects the step it reverses: compensations go first.
    Handoff.objects.filter(kind=HandoffKind.COMPENSATION).delete()
    Handoff.objects.all().delete()
    DestinationEvent.objects.all().delete()
    DestinationHealth.objects.all().delete()
    Approval.objects.all().delete()
    Request.objects.exclude(number=42).delete()
    ReceiverTask.objects.using("delivery").all().delete()
    SeenMessage.objects.using("delivery").all().delete()


def event_marks() -> tuple[dict[int, int], dict[int, int]]:
    """For every handoff, in one query: the id of the event that recorded it (exactly one) and of its first
    move into delivered from another state."""
    recorded, delivered = {}, {}
    events = HandoffEvent.objects.order_by("id").values_list(
        "handoff_id", "id", "from_state", "to_state"
    )
    for handoff_id, event_id, from_state, to_state in events:
        if from_state == "":
            assert handoff_id not in recorded, f"handoff {handoff_id} recorded twice"
            recorded[handoff_id] = event_id
        if to_state == S.DELIVERED and from_state != S.DELIVERED:
            delivered.setdefault(handoff_id, event_id)
    return recorded, delivered


class WorkflowMachine(RuleBasedStateMachine):
    world: dict = {}

    def __init__(self):
        super().__init__()
        clear_both_databases()
        self.approved: dict[int, bool] = {}  # request number -> approved with a contact e-mail
        self.crashed = []  # (claim, result or None): claims whose worker never recorded an outcome

    # --- helpers ----------------------------------------------------------------------------------

    @property
    def olga(self):
        return self.world["olga"]

    def _pick(self, data, queryset, label: str) -> Handoff:
        return data.draw(st.sampled_from(list(queryset.order_by("id"))), label=label)

    def _due(self):
        return Handoff.objects.due()

    # --- rules ------------------------------------------------------------------------------------

    @precondition(lambda self: len(self.approved) < len(NUMBERS))
    @rule(data=st.data(), with_email=st.booleans())
    def approve(self, data, with_email):
        number = data.draw(
            st.sampled_from([n for n in NUMBERS if n not in self.approved]), label="number"
        )
        payload = dict(ONBOARDING_PAYLOAD, client_name=f"Client {number}")
        if not with_email:
            # The receiver rejects the welcome pack without it: step 3 fails for good.
            payload.pop("contact_email")
        request = make_request(self.world["w7"], number, self.world["bob"], payload=payload)
        first = request_approve(
            workspace_id=7,
            number=number,
            revision=1,
            actor=self.world["alice"],
            payload_hash=request.payload_hash,
        )
        self.approved[number] = with_email
        assert first.action_key == f"{instance_key(number)}:create_client"
        assert Handoff.objects.filter(instance_key=instance_key(number)).count() == 1

    @rule()
    def dispatch(self):
        drain(destination=receiver())

    @precondition(lambda self: self._due().exists())
    @rule()
    def lost_acknowledgement(self):
        """The receiver commits the next due key and its answer is lost on the way back."""
        handoff = self._due().order_by("next_attempt_at", "id").first()
        dispatch_batch(
            destination=InProcessDestination(lose_ack_for={handoff.action_key}),
            limit=1,
            handoff_id=handoff.pk,
        )
        handoff.refresh_from_db()
        if ReceiverTask.objects.filter(action_key=handoff.action_key).exists():
            assert handoff.state in (S.UNCERTAIN, S.DELIVERED), handoff.state
        else:
            assert (handoff.state, handoff.failure_class) == (
                S.NEEDS_ATTENTION,
                FailureClass.PERMANENT,
            )

    @precondition(lambda self: self._due().exists())
    @rule(data=st.data(), reached_receiver=st.booleans())
    def worker_crashes(self, data, reached_receiver):
        """A worker claims a due handoff and dies before recording anything, after or before its call
        reached the receiver."""
        handoff = self._pick(data, self._due(), "claimed")
        [claim] = handoff_claim_due(
            worker=f"doomed-{len(self.crashed)}", limit=1, handoff_id=handoff.pk
        )
        result = receiver().deliver(claim.outgoing) if reached_receiver else None
        self.crashed.append((claim, result))

    @precondition(lambda self: Handoff.objects.filter(state=S.IN_FLIGHT).exists())
    @rule()
    def leases_run_out(self):
        """The crashed workers' leases pass, on the database clock; the sweep finds them."""
        in_flight = Handoff.objects.filter(state=S.IN_FLIGHT)
        count = in_flight.count()
        in_flight.update(lease_expires_at=db_now_plus(-5))
        assert handoff_expire_leases() == count
        assert not Handoff.objects.filter(state=S.IN_FLIGHT).exists()

    @precondition(lambda self: self.crashed)
    @rule(data=st.data())
    def crashed_worker_reports_late(self, data):
        """A worker thought dead reports after all: accepted only while its lease is still its own."""
        index = data.draw(st.integers(0, len(self.crashed) - 1), label="late claim")
        claim, result = self.crashed.pop(index)
        handoff = Handoff.objects.get(pk=claim.handoff_id)
        still_holds = (handoff.state, handoff.lease_owner, handoff.fencing_epoch) == (
            S.IN_FLIGHT,
            claim.worker,
            claim.epoch,
        )
        result = result or receiver().deliver(claim.outgoing)
        if still_holds:
            handoff_record_outcome(claim=claim, result=result, destination=receiver())
        else:
            before = (handoff.state, handoff.fencing_epoch, handoff.events.count())
            with pytest.raises(LeaseLost):
                handoff_record_outcome(claim=claim, result=result, destination=receiver())
            handoff.refresh_from_db()
            assert (handoff.state, handoff.fencing_epoch, handoff.events.count()) == before

    @precondition(lambda self: Handoff.objects.filter(state__in=NEEDS_PERSON_STATES).exists())
    @rule(data=st.data(), confirm_risk=st.booleans())
    def retry(self, data, confirm_risk):
        handoff = self._pick(data, Handoff.objects.filter(state__in=NEEDS_PERSON_STATES), "retried")
        risky = handoff.state == S.UNCERTAIN or handoff.failure_class in UNKNOWN_OUTCOME
        if risky and not confirm_risk:
            with pytest.raises(RiskNotConfirmed):
                handoff_retry(handoff_id=handoff.pk, actor=self.olga, reason="try again")
            assert Handoff.objects.get(pk=handoff.pk).state == handoff.state
            return
        handoff_retry(
            handoff_id=handoff.pk, actor=self.olga, reason="try again", confirm_risk=confirm_risk
        )
        assert Handoff.objects.get(pk=handoff.pk).state == S.PENDING

    @rule(data=st.data(), one=st.booleans())
    def reconcile(self, data, one):
        needing = Handoff.objects.filter(state__in=NEEDS_PERSON_STATES)
        if one and needing.exists():
            handoff = self._pick(data, needing, "reconciled")
            handoff_settle(handoff_id=handoff.pk, destination=receiver(), actor=self.olga)
        else:
            sweep(destination=receiver())

    @precondition(
        lambda self: Handoff.objects.filter(kind=HandoffKind.ACTION, state=S.PENDING).exists()
    )
    @rule(data=st.data())
    def cancel(self, data):
        """The operator cancels a pending step. A first step is cancelled and its instance with it; a later
        step (its predecessors delivered) is refused alone, so the operator compensates the workflow, as the
        console offers (test_a_later_step_of_a_partly_done_instance_is_not_cancelled_alone below)."""
        handoff = self._pick(
            data, Handoff.objects.filter(kind=HandoffKind.ACTION, state=S.PENDING), "cancelled"
        )
        if handoff.step_index > 0:
            with pytest.raises(CompensationBlocked, match="compensate the workflow instead"):
                handoff_cancel(handoff_id=handoff.pk, actor=self.olga, reason="client withdrew")
            assert Handoff.objects.get(pk=handoff.pk).state == S.PENDING
            plan = instance_compensate(
                instance_key=handoff.instance_key, actor=self.olga, reason="client withdrew"
            )
            assert [h.pk for h in plan.cancel] == [handoff.pk] and plan.reverse, (
                "the delivered steps are reversed"
            )
        else:
            handoff_cancel(handoff_id=handoff.pk, actor=self.olga, reason="client withdrew")
            assert instance_status(instance_handoffs(handoff.instance_key)) == "cancelled"

    @precondition(lambda self: self.approved)
    @rule(data=st.data())
    def compensate(self, data):
        number = data.draw(st.sampled_from(sorted(self.approved)), label="compensated instance")
        key = instance_key(number)
        handoffs = instance_handoffs(key)
        steps = [h for h in handoffs if h.kind == HandoffKind.ACTION]
        unknown = [
            h
            for h in steps
            if h.state in (S.IN_FLIGHT, S.UNCERTAIN)
            or (h.state == S.NEEDS_ATTENTION and h.failure_class in UNKNOWN_OUTCOME)
        ]
        delivered = [h for h in steps if h.state == S.DELIVERED]
        waiting = [h for h in steps if h.state in (S.PENDING, S.NEEDS_ATTENTION)]
        started = any(h.kind == HandoffKind.COMPENSATION for h in handoffs)
        try:
            plan = instance_compensate(instance_key=key, actor=self.olga, reason="client withdrew")
        except CompensationBlocked:
            assert unknown or started or not (delivered or waiting), [
                (h.action_key, h.state) for h in handoffs
            ]
            return
        assert not unknown and not started
        compensable = sorted(
            (h for h in delivered if h.compensation_operation), key=lambda h: -h.step_index
        )
        assert [h.pk for h in plan.reverse] == [h.pk for h in compensable]
        assert {h.pk for h in plan.residual} == {
            h.pk for h in delivered if not h.compensation_operation
        }
        assert {h.pk for h in plan.cancel} == {h.pk for h in waiting}
        recorded = Handoff.objects.filter(instance_key=key, kind=HandoffKind.COMPENSATION)
        assert [h.compensates_id for h in recorded] == [h.pk for h in compensable[:1]]

    @precondition(lambda self: Handoff.objects.filter(compensation_state=C.RESIDUAL).exists())
    @rule(data=st.data())
    def residual_repaired(self, data):
        handoff = self._pick(
            data, Handoff.objects.filter(compensation_state=C.RESIDUAL), "repaired"
        )
        handoff_residual_repaired(
            handoff_id=handoff.pk, actor=self.olga, reason="undone by hand at the receiver"
        )

    # --- invariants -------------------------------------------------------------------------------

    @invariant()
    def one_receiver_task_per_key_and_delivered_handoffs_carry_its_id(self):
        tasks = ReceiverTask.objects.using("delivery")
        assert not tasks.values("action_key").annotate(n=Count("id")).filter(n__gt=1).exists()
        task_ids = dict(tasks.values_list("action_key", "task_id"))
        keys = set(Handoff.objects.values_list("action_key", flat=True))
        assert set(task_ids) <= keys, f"tasks for keys never recorded: {set(task_ids) - keys}"
        for handoff in Handoff.objects.filter(state=S.DELIVERED):
            assert handoff.action_key in task_ids, (
                f"{handoff.action_key} delivered, no task at the receiver"
            )
            assert handoff.destination_id == str(task_ids[handoff.action_key]), handoff.action_key

    @invariant()
    def no_step_recorded_before_its_predecessor_was_delivered(self):
        actions = list(Handoff.objects.filter(kind=HandoffKind.ACTION))
        steps = {(h.instance_key, h.step_index): h for h in actions}
        assert len(steps) == len(actions), "two handoffs for one step of an instance"
        recorded, delivered = event_marks()
        for (instance, index), step in steps.items():
            if index == 0:
                continue
            predecessor = steps[(instance, index - 1)]
            assert predecessor.state == S.DELIVERED, (
                f"{step.action_key} exists, {predecessor.action_key} is {predecessor.state}"
            )
            delivered_id = delivered.get(predecessor.pk)
            assert delivered_id is not None and recorded[step.pk] > delivered_id, step.action_key
            assert step.payload[OPERATION_FIELD] == ONBOARDING_STEPS[step.step_index]["name"]

    @invariant()
    def compensation_only_of_delivered_steps_latest_first(self):
        recorded, delivered = event_marks()
        for number in self.approved:
            handoffs = instance_handoffs(instance_key(number))
            steps = {h.pk: h for h in handoffs if h.kind == HandoffKind.ACTION}
            compensations = sorted(
                (h for h in handoffs if h.kind == HandoffKind.COMPENSATION), key=lambda h: h.pk
            )
            for compensation in compensations:
                step = steps.get(compensation.compensates_id)
                assert step is not None, (
                    f"{compensation.action_key} reverses no step of its instance"
                )
                assert step.state == S.DELIVERED and step.compensation_operation, step.action_key
                assert compensation.action_key == compensation_key(step.action_key)
                assert compensation.payload[OPERATION_FIELD] == step.compensation_operation
                assert recorded[compensation.pk] > delivered[step.pk], compensation.action_key
                reversed_by_it = compensation.state == S.DELIVERED
                assert (step.compensation_state == C.COMPENSATED) == reversed_by_it, step.action_key
            for earlier, later in zip(compensations, compensations[1:], strict=False):
                assert later.step_index < earlier.step_index, (
                    "compensation in reverse order of the steps"
                )
                delivered_id = delivered.get(earlier.pk)
                assert delivered_id is not None and recorded[later.pk] > delivered_id, (
                    later.action_key
                )
            if compensations:
                # Compensation started: nothing of the instance is sent forward again.
                assert not [
                    h.action_key for h in steps.values() if h.state in (S.PENDING, S.IN_FLIGHT)
                ]
                reversible = [
                    h for h in steps.values() if h.state == S.DELIVERED and h.compensation_operation
                ]
                latest = max(reversible, key=lambda h: h.step_index)
                assert compensations[0].compensates_id == latest.pk, (
                    "the latest delivered step is reversed first"
                )

    def teardown(self):
        """The dispatcher and the sweep run until nothing moves; then each instance has an ending."""
        try:
            Handoff.objects.filter(state=S.IN_FLIGHT).update(lease_expires_at=db_now_plus(-5))
            handoff_expire_leases()
            for _ in range(10):
                sweep(destination=receiver())
                if not Handoff.objects.filter(
                    state__in=(S.PENDING, S.IN_FLIGHT, S.UNCERTAIN)
                ).exists():
                    break
            self.one_receiver_task_per_key_and_delivered_handoffs_carry_its_id()
            self.no_step_recorded_before_its_predecessor_was_delivered()
            self.compensation_only_of_delivered_steps_latest_first()
            for number in self.approved:
                handoffs = instance_handoffs(instance_key(number))
                status = instance_status(handoffs)
                states = [
                    (h.action_key, h.state, h.failure_class, h.compensation_state) for h in handoffs
                ]
                assert status in ENDINGS, f"{instance_key(number)} ends {status!r}: {states}"
                if status == "needs a person":
                    assert any(
                        h.state in NEEDS_PERSON_STATES or h.compensation_state == C.RESIDUAL
                        for h in handoffs
                    ), states
        finally:
            super().teardown()


@pytest.fixture
def world():
    return three_step_onboarding_world()


@pytest.fixture
def commits_not_waiting_for_the_disk():
    """Each of the machine's ~28,000 statements commits on its own, and on PostgreSQL each commit waited
    for its WAL flush (5 ms a commit on a loaded machine, 0.4 ms without): most of the test's time. Off
    for this test's own sessions, a connection opened again included: a commit is as visible to the next
    statement as before, only a crash of the database server (which this test never causes) could lose the
    last ones."""

    def no_flush_wait(sender, connection, **kwargs):
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SET synchronous_commit TO off")

    connection_created.connect(no_flush_wait)
    for alias in ("default", "delivery"):
        connections[alias].ensure_connection()
        no_flush_wait(None, connections[alias])
    yield
    connection_created.disconnect(no_flush_wait)
    for alias in ("default", "delivery"):
        if connections[alias].vendor == "postgresql" and connections[alias].connection:
            with connections[alias].cursor() as cursor:
                cursor.execute("RESET synchronous_commit")


@pytest.mark.long
def test_workflow_instances_keep_their_invariants_in_any_order_of_faults_and_actions(
    world, commits_not_waiting_for_the_disk
):
    WorkflowMachine.world = world
    run_state_machine_as_test(
        WorkflowMachine,
        # Modest and random (no derandomize): each run explores other orders; a failure found is replayed
        # first next time from the local example database. The explain phase is left out: it reruns the
        # failing case many times over both databases and adds minutes to a failure without a new fact.
        settings=settings(
            max_examples=EXAMPLES[connections["default"].vendor],
            stateful_step_count=25,
            deadline=None,
            phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )


def test_a_later_step_of_a_partly_done_instance_is_not_cancelled_alone(world):
    request = make_request(world["w7"], 51, world["bob"], payload=dict(ONBOARDING_PAYLOAD))
    first = request_approve(
        workspace_id=7,
        number=51,
        revision=1,
        actor=world["alice"],
        payload_hash=request.payload_hash,
    )
    dispatch_batch(destination=receiver(), limit=1, handoff_id=first.pk)
    second = Handoff.objects.get(action_key=f"{instance_key(51)}:provision_account")
    with pytest.raises(CompensationBlocked, match="compensate the workflow instead"):
        handoff_cancel(handoff_id=second.pk, actor=world["olga"], reason="client withdrew")
    instance_compensate(
        instance_key=instance_key(51), actor=world["olga"], reason="client withdrew"
    )
    sweep(destination=receiver())
    assert instance_status(instance_handoffs(instance_key(51))) == "compensated"
