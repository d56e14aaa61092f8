"""Recording a handoff: the outbox row of an approved action, written in the caller's transaction."""

from collections.abc import Mapping, Sequence

from django.db import IntegrityError, transaction

from lib.databases import DB
from lib.request_mapping import sent_body
from outbox.clock import db_now
from outbox.destinations.registry import default_destination_name
from outbox.dispatch.wakeups import wake_dispatcher_on_commit
from outbox.errors import ActionKeyExists
from outbox.models import ArchivedHandoff, Handoff, HandoffEvent, HandoffState
from outbox.payloads import payload_hash
from outbox.search_text import search_text
from outbox.steps import entry_fixed, fixed_at_approval, plan_steps, step_payload

S = HandoffState


def handoff_record(
    *,
    workflow: str,
    workspace_id: int,
    source_ref: str,
    source_id: int,
    action_key: str,
    payload: dict,
    rule_version: str = "",
    owner=None,
    actor=None,
    observe_only: bool = False,
    steps: Sequence[dict] = (),
    requests: Mapping[str, dict] | None = None,
    searchable: Sequence[str] = (),
    destination: str = "",
) -> Handoff:
    """Write the outbox row for an approved action. Meant to run inside the caller's transaction.

    `action_key` is the instance's key. A workflow of several `steps` records only its first step now, with
    its own key `<instance>:<step>` and the rest of the plan; each later step is recorded when the one
    before it is delivered (`record_successors`). Each handoff names its destination: its step's (from the
    rule version), else the default destination. `requests`: the requests approved with the decision, by
    step name: each step's handoff freezes its own (`Handoff.request`), never rendered again. `searchable`:
    the payload fields the workflow marks searchable; the whole instance's payload is searched, whatever
    part of it a step sends (`outbox/search_text.py`). `destination`: where a handoff of no steps goes (the
    product's own, an incident's notification to its channel's destination), else the default one."""
    default = destination or default_destination_name()
    fields = _first_step(action_key, payload, steps, default, requests or {})
    with transaction.atomic(using=DB):
        handoff = create_handoff(
            workflow=workflow,
            workspace_id=workspace_id,
            source_ref=source_ref,
            source_id=source_id,
            rule_version=rule_version,
            owner=owner,
            instance_key=action_key,
            observe_only=observe_only,
            search_text=search_text(
                action_key=action_key, source_ref=source_ref, payload=payload, fields=searchable
            ),
            **fields,
        )
        _recorded_event(handoff, actor=actor, observe_only=observe_only)
    if not observe_only:
        wake_dispatcher_on_commit(destination=handoff.destination)
    return handoff


def _recorded_event(handoff: Handoff, *, actor, observe_only: bool) -> None:
    HandoffEvent.objects.using(DB).create(
        handoff=handoff,
        from_state="",
        to_state=handoff.state,
        actor=actor,
        actor_label=actor.get_username() if actor else "system",
        reason="observe-only: recorded, not sent" if observe_only else "approved; handoff recorded",
    )


def _first_step(
    action_key: str, payload: dict, steps: Sequence[dict], default: str, requests: Mapping
) -> dict:
    """The row's key, payload and destination: the instance's own (the default destination), or its first
    step's with the rest of the plan. Always named: the model's default name is nobody's choice."""
    if not steps:
        return {"action_key": action_key, "payload": payload, "destination": default}
    fixed = fixed_at_approval(steps, payload)
    [first, *_rest] = plan_steps(
        action_key, steps, default_destination=default, start=0, requests=requests, fixed=fixed
    )
    return {
        "action_key": first["key"],
        "payload": step_payload(payload, first["operation"]),
        "destination": first["destination"],
        "step": first["step"],
        "compensation_operation": first["compensation"],
        "plan": plan_steps(
            action_key, steps, default_destination=default, requests=requests, fixed=fixed
        ),
        "request": first.get("request"),
        **entry_fixed(first),
    }


def create_handoff(
    *,
    observe_only: bool = False,
    payload: dict,
    action_key: str,
    request: dict | None = None,
    **fields,
) -> Handoff:
    """Insert one outbox row, due at once (or observed only); a key that exists is ActionKeyExists, whether
    its handoff is still in the outbox or was archived by retention (`outbox/services/retention.py`): a key is
    recorded once for ever, so an archived one never gets a second handoff, nor a second effect.

    The archive is asked after the insert, in the same savepoint, which closes the race with a retention batch
    moving this very key: on PostgreSQL the insert waits on the unique index for a batch that deleted the hot
    row and has not committed; once it commits, the insert goes through and the next statement (a new
    snapshot under READ COMMITTED) sees its archive row; if it rolls back, the insert meets the row again.
    On SQLite a transaction holds the write lock from its start (IMMEDIATE), so no batch runs in between."""
    try:
        with transaction.atomic(using=DB):
            handoff = Handoff.objects.using(DB).create(
                action_key=action_key,
                payload=payload,
                request=request,
                # Of what the destination receives: what it echoes and what lookups compare.
                payload_hash=payload_hash(sent_body(request, payload)),
                state=S.OBSERVED if observe_only else S.PENDING,
                # A step that may not go before a time is not due before it (the claim's index then
                # leaves it out until then, however many wait).
                next_attempt_at=None if observe_only else fields.get("not_before") or db_now(),
                run_started_at=None if observe_only else db_now(),
                reason_code="observe_mode" if observe_only else "",
                **fields,
            )
            if ArchivedHandoff.objects.using(DB).filter(action_key=action_key).exists():
                raise ActionKeyExists(action_key)  # rolls the insert back with the savepoint
            if handoff.order_key and handoff.order_position is None:
                # The first of its instance: its own id is the instance's place in approval order.
                handoff.order_position = handoff.pk
                handoff.save(using=DB, update_fields=["order_position"])
            return handoff
    except IntegrityError as exc:
        raise ActionKeyExists(action_key) from exc
