"""What `handoffs list` and `handoffs show` read: the console's list (its filter, its workspace scope, its
keyset pages) and one handoff's page (attempts, history, redacted payload, the safest next action), as plain
data for text or JSON output. Writes nothing."""

from types import SimpleNamespace

from approvals.selectors import is_operator_of, workspace_ids_for
from console.cli.frame import Refused, visible_handoff
from console.filters import HandoffFilter, handoff_list_page
from console.waiting_status import case_hold_mark, handoff_case_held
from lib.querystring import BadQueryValue, keyset_cursor, parse_keyset_cursor
from outbox.guidance import available_actions, next_step
from outbox.hold_lines import destination_holds_now
from outbox.models import Handoff
from outbox.page_clock import page_now
from outbox.redaction import redact
from outbox.selectors import handoff_timeline, handoffs_in
from reconciliation.selectors import live_findings_of


def matching(user, data: dict[str, str], workspace_ids: list[int]):
    """The handoffs of `workspace_ids` the console's filter keeps for `data`; a value the filter does not
    accept is refused with its field (the console's bulk refusal), never dropped."""
    handoff_filter = HandoffFilter(
        data or None,
        # A held row's mark comes from the same query, as on the console's list.
        queryset=handoffs_in(workspace_ids).select_related("case_hold"),
        request=SimpleNamespace(user=user),
        workspace_ids=workspace_ids,
    )
    if data and not handoff_filter.is_valid():
        problems = [
            f"{field} {data.get(field, '')!r}: {' '.join(errors)}"
            for field, errors in sorted(handoff_filter.errors.items())
        ]
        raise Refused("Nothing was done: " + "; ".join(problems) + ".", status=422)
    return handoff_filter.qs


def row(handoff: Handoff) -> dict:
    """A list row: what the console's row shows."""
    return {
        "id": handoff.pk,
        "action_key": handoff.action_key,
        "workspace": handoff.workspace_id,
        "state": handoff.state,
        "attempts": handoff.attempts,
        "failure_class": handoff.failure_class,
        "reason_code": handoff.reason_code,
        "destination": handoff.destination,
        "destination_task_id": handoff.destination_id,
        "owner": handoff.owner.get_username() if handoff.owner else "",
        "created_at": handoff.created_at.isoformat(),
        # The console row's mark of a held case (`case_hold_mark`), empty when not held.
        "held": case_hold_mark(handoff.case_hold, page_now()) if handoff.is_held else "",
    }


def handoff_list(user, data: dict[str, str], *, after: str, limit: int) -> dict:
    try:
        cursor = parse_keyset_cursor(after, name="after")
    except BadQueryValue as exc:
        raise Refused(f"Nothing was done: {exc}.", status=422) from exc
    visible = workspace_ids_for(user)
    rows, more = handoff_list_page(
        matching(user, data, visible), data=data, workspace_ids=visible, after=cursor, size=limit
    )
    return {"handoffs": [row(h) for h in rows], "next": keyset_cursor(rows[-1]) if more else ""}


def handoff_show(user, pk: int) -> dict:
    handoff = visible_handoff(user, pk)
    attempts, events = handoff_timeline(handoff)
    findings = list(live_findings_of(handoff.action_key))
    guidance = next_step(handoff, findings, holds=destination_holds_now(handoff.destination))
    operator = is_operator_of(user.pk, handoff.workspace_id)
    held = handoff_case_held(handoff, page_now())
    return {
        **row(handoff),
        # The handoff page's hold line: who holds it, since and until when, why, and what sends it.
        "hold": f"{held.why}; {held.next}" if held else "",
        "source": handoff.source_ref,
        "rule_version": handoff.rule_version,
        "last_error": redact(handoff.last_error),
        "payload": redact(handoff.payload),
        "next_step": {"headline": guidance.headline, "detail": guidance.detail},
        "actions": available_actions(handoff, findings) if operator else [],
        "attempts": [
            {
                "number": a.number,
                "outcome": a.outcome,
                "failure_class": a.failure_class,
                "reason_code": a.reason_code,
                "status_code": a.status_code,
            }
            for a in attempts
        ],
        "events": [
            {
                "at": e.at.isoformat(),
                "actor": e.actor.get_username() if e.actor else e.actor_label,
                "action": e.action,
                "from": e.from_state,
                "to": e.to_state,
                "reason": redact(e.reason),
            }
            for e in events
        ],
    }
