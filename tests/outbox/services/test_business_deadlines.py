"""A workflow step's business times (issue 39, "Business deadlines"): not sent before its not-before, never
after its must-finish-by (it goes to a person with the reason code `deadline_passed` instead), both fixed at
the approval from a payload field or relative to the approval and carried to later steps; and the workflow
check refuses a retry window or an attention SLA that outlasts the deadline it serves, the field named. The
database clock decides every comparison. Both backends."""

import json
import threading
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command

from approvals.models import RuleVersion
from approvals.services.rule_versions import rule_version_problems, rule_version_publish
from outbox.clock import db_time
from outbox.dispatch.claims import handoff_claim_due
from outbox.dispatch.dispatcher import drain, sweep
from outbox.dispatch.held_destinations import Holds
from outbox.dispatch.runner import Pool, _supervise
from outbox.dispatch.serving import Schedule
from outbox.models import Attempt, DestinationConfig, Handoff, HandoffEvent, HandoffState
from outbox.services.deadlines import DEADLINE_PASSED, handoffs_past_deadline
from tests.builders import approve
from tests.factories import ONBOARDING_PAYLOAD, HandoffFactory, onboarding_world
from tests.factories import ONBOARDING_THREE_STEPS_SCHEMA as BASE

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
S = HandoffState
SCHEMA = {
    **BASE,
    "properties": {
        **BASE["properties"],
        "start_at": {"type": "string", "format": "date-time"},
        "due_at": {"type": "string", "format": "date-time"},
    },
}
DAY = 24 * 3600


def _publish(world, steps: list[dict]) -> None:
    rule_version_publish(workflow="onboarding", schema=SCHEMA, steps=steps, actor=None)


def _first(number: int) -> Handoff:
    return Handoff.objects.get(action_key=f"onboarding:7:{number}:1:create_client")


@pytest.fixture
def world():
    return onboarding_world()


def test_a_step_is_not_sent_before_its_not_before_and_goes_once_it_has_passed(world):
    _publish(world, [{"name": "create_client", "not_before": {"field": "start_at"}}])
    start = db_time() + timedelta(hours=1)
    approve(world, 50, payload={**ONBOARDING_PAYLOAD, "start_at": start.isoformat()})
    step = _first(50)
    assert step.not_before == start and step.next_attempt_at == start
    drain()
    assert handoff_claim_due(worker="w1") == []
    assert not Attempt.objects.filter(handoff=step).exists()

    # The time comes (moved back rather than waited for): it goes.
    Handoff.objects.filter(pk=step.pk).update(
        not_before=db_time() - timedelta(seconds=1), next_attempt_at=db_time()
    )
    drain()
    assert Handoff.objects.get(pk=step.pk).state == S.DELIVERED


def test_a_step_past_its_must_finish_by_goes_to_a_person_and_is_never_sent(world):
    _publish(
        world,
        [
            {"name": "create_client", "finish_by": {"after_approval": 2 * DAY}},
            {
                "name": "provision_account",
                "not_before": {"field": "start_at"},
                "finish_by": {"field": "due_at"},
            },
        ],
    )
    start, due = db_time() + timedelta(hours=1), db_time() + timedelta(hours=3)
    payload = {**ONBOARDING_PAYLOAD, "start_at": start.isoformat(), "due_at": due.isoformat()}
    approve(world, 51, payload=payload)
    first = _first(51)
    assert timedelta(days=2) - timedelta(seconds=5) < first.finish_by - first.created_at
    assert first.finish_by - first.created_at < timedelta(days=2) + timedelta(seconds=5)
    drain()
    second = Handoff.objects.get(action_key="onboarding:7:51:1:provision_account")
    # The later step carries the times fixed at the approval, and waits for its not-before.
    assert (second.state, second.not_before, second.finish_by) == (S.PENDING, start, due)
    # Both pass (moved back rather than waited for) before it could go: it is due, and too late.
    Handoff.objects.filter(pk=second.pk).update(
        not_before=db_time() - timedelta(hours=2),
        finish_by=db_time() - timedelta(seconds=1),
        next_attempt_at=db_time(),
    )
    assert handoff_claim_due(worker="w1") == []  # the claim leaves it out, swept or not

    assert handoffs_past_deadline() == 1
    second.refresh_from_db()
    assert (second.state, second.reason_code, second.attempts) == (
        S.NEEDS_ATTENTION,
        DEADLINE_PASSED,
        0,
    )
    event = HandoffEvent.objects.filter(handoff=second, to_state=S.NEEDS_ATTENTION).get()
    assert event.actor_label == "deadline sweep" and "not sent late" in event.reason
    assert handoffs_past_deadline() == 0


def test_the_check_refuses_a_retry_window_or_sla_outlasting_the_deadline_field_named(world):
    steps = [{"name": "create_client", "finish_by": {"after_approval": 1800}}]
    problems = rule_version_problems(schema=SCHEMA, steps=steps)
    assert any(
        p.startswith("steps[0].finish_by.after_approval: the retry window of destination")
        and "(86400 s) outlasts the 1800 s this deadline leaves" in p
        for p in problems
    ), problems
    assert any("HANDOFF_SLA_MINUTES, 3600 s) outlasts the 1800 s" in p for p in problems)
    assert rule_version_problems(
        schema=SCHEMA,
        steps=[
            {
                "name": "create_client",
                "not_before": {"after_approval": 600},
                "finish_by": {"after_approval": 600},
            }
        ],
    ) == ["steps[0].finish_by.after_approval: 600 s is not after not_before (600 s)"]
    assert rule_version_problems(
        schema=SCHEMA, steps=[{"name": "create_client", "not_before": {"field": "nope"}}]
    )[0].startswith("steps[0].not_before.field: 'nope' is no field of the schema")
    assert (
        rule_version_problems(
            schema=SCHEMA, steps=[{**steps[0], "finish_by": {"after_approval": 2 * DAY}}]
        )
        == []
    )


def test_workflows_check_names_the_deadline_and_writes_nothing(world, tmp_path):
    path = tmp_path / "workflows.json"
    entry = {
        "name": "onboarding",
        "schema": SCHEMA,
        "steps": [{"name": "create_client", "finish_by": {"after_approval": 1800}}],
    }
    path.write_text(json.dumps({"workflows": [entry]}))
    before = RuleVersion.objects.count()
    with pytest.raises(CommandError) as refused:
        call_command("workflows", "check", str(path))
    assert "workflows[0] (onboarding): steps[0].finish_by.after_approval: the retry window" in str(
        refused.value
    )
    assert RuleVersion.objects.count() == before


def test_workflows_check_refuses_a_deadline_field_that_holds_no_time_field_named(world, tmp_path):
    """A deadline read from the payload names a field the schema declares a time ("format": "date-time" or
    "date"); a field of another type or format would give no request a time: refused, the field named."""
    schema = {
        **SCHEMA,
        "properties": {**SCHEMA["properties"], "seats": {"type": "integer"}},
    }
    for field, said in (("plan", "type 'string', format None"), ("seats", "type 'integer'")):
        problems = rule_version_problems(
            schema=schema, steps=[{"name": "create_client", "finish_by": {"field": field}}]
        )
        assert len(problems) == 1 and problems[0].startswith(
            f"steps[0].finish_by.field: {field!r} holds no time (its schema says {said}"
        ), problems
    path = tmp_path / "workflows.json"
    entry = {
        "name": "onboarding",
        "schema": schema,
        "steps": [{"name": "create_client", "not_before": {"field": "plan"}}],
    }
    path.write_text(json.dumps({"workflows": [entry]}))
    before = RuleVersion.objects.count()
    with pytest.raises(CommandError) as refused:
        call_command("workflows", "check", str(path))
    assert "workflows[0] (onboarding): steps[0].not_before.field: 'plan' holds no time" in str(
        refused.value
    )
    assert RuleVersion.objects.count() == before


@pytest.fixture
def supervision(settings, tmp_path):
    """A long-running dispatcher's supervision turn (`outbox/dispatch/runner.py`), no worker beside it."""
    settings.VAR_DIR = tmp_path
    settings.HANDOFF_DISPATCH_WORKERS = 0
    stop = threading.Event()
    pool = Pool(Schedule(idle_sleep=0.5, maintain_every=5.0, stop=stop, lanes=1), "w1", stop)
    yield lambda: _supervise(pool, Holds())
    stop.set()


@pytest.mark.parametrize("served_by", ["sweep", "supervision"])
@pytest.mark.parametrize(
    "row",
    [
        {"kind": "in_process", "enabled": False},  # disabled by its operator
        {"kind": "fax_machine", "enabled": True},  # a problem no dispatcher serves it with
    ],
    ids=["disabled", "not servable"],
)
def test_a_deadline_holds_whatever_its_destinations_state(world, request, served_by, row):
    """A step's must-finish-by is the business's, not the destination's: a destination no dispatcher serves
    (disabled, or held for a problem) still sees its steps past their deadline go to a person, by the
    django-q2 sweep and by a long-running dispatcher's supervision alike."""
    DestinationConfig.objects.create(name="crm", config={}, **row)
    late = HandoffFactory(number=60, destination="crm", finish_by=db_time() - timedelta(seconds=1))
    sweep() if served_by == "sweep" else request.getfixturevalue("supervision")()
    late.refresh_from_db()
    assert (late.state, late.reason_code, late.attempts) == (
        S.NEEDS_ATTENTION,
        DEADLINE_PASSED,
        0,
    )
