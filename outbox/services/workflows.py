"""A workflow's later steps and compensations: each recorded in the transaction that records its
predecessor delivered (never earlier), and the mark a delivered compensation leaves on the step it
reversed. The plans themselves are decided in `outbox/steps.py`."""

import contextlib
from collections.abc import Iterable

from lib.databases import DB
from outbox.dispatch.wakeups import wake_dispatcher_on_commit
from outbox.errors import ActionKeyExists, InvalidTransition
from outbox.models import (
    COMPENSATION_TRANSITIONS,
    CompensationState,
    FailureClass,
    Handoff,
    HandoffEvent,
    HandoffKind,
    HandoffState,
)
from outbox.services.case_holds import hold_of_successor
from outbox.services.moves import move_changes
from outbox.services.recording import create_handoff
from outbox.steps import base_payload, entry_fixed, erased_undo_missing, step_payload


def record_planned(
    after: Handoff, entry: dict, rest: list[dict], *, reason: str, actor=None, actor_label: str = ""
) -> Handoff:
    """The handoff a plan entry names (a later step, or a compensation), of the same instance as `after`, with
    the rest of the plan; its event says why. ActionKeyExists when it was recorded before."""
    planned = create_handoff(
        workflow=after.workflow,
        workspace_id=after.workspace_id,
        source_ref=after.source_ref,
        source_id=after.source_id,
        rule_version=after.rule_version,
        owner_id=after.owner_id,
        # Plans recorded before steps named destinations carry none: the instance's destination then.
        destination=entry.get("destination") or after.destination,
        instance_key=after.instance_key,
        action_key=entry["key"],
        payload=step_payload(base_payload(after.payload), entry["operation"]),
        # The request approved with the decision, carried by the plan: never rendered again.
        request=entry.get("request"),
        step=entry["step"],
        step_index=entry["index"],
        kind=entry["kind"],
        compensation_operation=entry.get("compensation", ""),
        compensates_id=entry.get("compensates"),
        plan=rest,
        search_text=after.search_text,
        # Its business times and ordering key, fixed at the approval (`outbox/steps.py`), and its
        # instance's place in approval order.
        **entry_fixed(entry),
        order_position=_order_position(after) if entry.get("order_key") else None,
        # A step recorded while its whole case is held is held with it.
        case_hold_id=hold_of_successor(after),
    )
    if after.erasure_id and (why := _sends_erased(planned)):
        reason = _to_a_person_erased(planned, after, f"{reason}; {why}")
    HandoffEvent.objects.using(DB).create(
        handoff=planned,
        from_state="",
        to_state=planned.state,
        actor=actor,
        actor_label=actor_label or (actor.get_username() if actor else "system"),
        action="compensate" if entry["kind"] == HandoffKind.COMPENSATION and actor else "",
        reason=reason,
    )
    wake_dispatcher_on_commit(destination=planned.destination)
    return planned


def _sends_erased(planned: Handoff) -> str:
    """Why `planned`, recorded from a handoff whose subject was erased, would send "[erased]" where that data
    was ("" when it sends none of it): a step sends its payload, a compensation what its step's undo sends
    (docs/security.md, "Erasure")."""
    if planned.kind == HandoffKind.ACTION or planned.compensates_id is None:
        return "its payload is the erased one"
    return erased_undo_missing(Handoff.objects.using(DB).get(pk=planned.compensates_id))


def _to_a_person_erased(planned: Handoff, after: Handoff, reason: str) -> str:
    """The next step or compensation of a handoff whose subject was erased on request (settled delivered after
    the erasure), where sent it would carry "[erased]" (`_sends_erased`). It is recorded, marked with the
    erasure, and goes to a person, never sent (as an erased handoff settlement found not sent,
    `outbox/outcomes.py`); its event's reason says so."""
    if planned.state != HandoffState.PENDING:
        return reason  # observed only: never sent anyway
    changes = move_changes(
        planned.state,
        HandoffState.NEEDS_ATTENTION,
        {
            "erasure_id": after.erasure_id,
            "failure_class": FailureClass.PERMANENT,
            "reason_code": "erased_not_sent",
            "last_error": "its subject's personal data was erased before it was sent",
        },
        action_key=planned.action_key,
    )
    Handoff.objects.using(DB).filter(pk=planned.pk).update(**changes)
    planned.refresh_from_db(using=DB, fields=list(changes))
    return f"{reason}; its subject's personal data was erased: not sent, a person decides"


def _order_position(after: Handoff) -> int:
    """The instance's place in approval order: its first row's id (`create_handoff` sets it there)."""
    if after.order_position is not None:
        return after.order_position
    rows = Handoff.objects.using(DB).filter(instance_key=after.instance_key)
    return rows.order_by("pk").values_list("pk", flat=True).first() or after.pk


def record_successors(delivered: Iterable[Handoff], *, actor_label: str) -> None:
    """In the transaction that records these handoffs delivered: the next step of each (or the next
    compensation), and a delivered compensation marks the step it reversed. Never earlier."""
    for handoff in delivered:
        if handoff.kind == HandoffKind.COMPENSATION and handoff.compensates_id:
            mark_compensation(
                handoff.compensates_id,
                CompensationState.COMPENSATED,
                actor_label=actor_label,
                reason=f"reversed by {handoff.action_key}",
            )
        if not handoff.plan:
            continue
        with contextlib.suppress(
            ActionKeyExists
        ):  # recorded before (its predecessor delivered again)
            record_planned(
                handoff,
                handoff.plan[0],
                handoff.plan[1:],
                actor_label=actor_label,
                reason=f"recorded when {handoff.action_key} was delivered",
            )


def mark_compensation(
    handoff_id: int, to_state: str, *, actor=None, actor_label: str = "", reason: str
) -> None:
    step = Handoff.objects.using(DB).select_for_update(no_key=True).get(pk=handoff_id)
    if to_state not in COMPENSATION_TRANSITIONS[step.compensation_state]:
        raise InvalidTransition(
            step.action_key, step.compensation_state or "not compensated", to_state
        )
    step.compensation_state = to_state
    step.save(using=DB, update_fields=["compensation_state", "updated_at"])
    HandoffEvent.objects.using(DB).create(
        handoff=step,
        from_state=step.state,
        to_state=step.state,
        actor=actor,
        actor_label=actor_label or (actor.get_username() if actor else "system"),
        action="compensate",
        reason=f"{to_state}: {reason}",
    )
