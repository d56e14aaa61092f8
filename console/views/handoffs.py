"""Console views of handoffs. Thin: parse, authorize (workspace scope and role), call one service, render.

Every screen answers 404 for a handoff outside the user's workspaces. Actions need the operator role
in the handoff's workspace. htmx requests get the swapped region (a table row, the detail panel or the
list results); plain requests get the whole page, so every screen works without JavaScript.
"""

from functools import wraps

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.views.decorators.http import require_GET, require_POST

from approvals.errors import ApprovalsError, InvalidPayload
from approvals.models import Role
from approvals.rules import rules_for
from approvals.selectors import (
    correction_fields,
    is_operator_of,
    operators_of,
    revision_by_id,
    workspace_ids_for,
)
from console.claims import handoff_claims
from console.correction_forms import HandoffCorrectionForm
from console.destination_holds import destination_held, shown_holds
from console.evidence_words import (
    last_step_words,
    task_now,
    task_words_now,
    work_words,
)
from console.handoff_action_words import HOLD_WHOLE_CASE_BY_DEFAULT
from console.step_status import Evidence, StatusLine, step_line
from console.views.handoff_list import table_rows
from console.waiting_status import handoff_case_held
from lib.htmx import HtmxHttpRequest
from outbox.destinations import DestinationUnavailable, destination_named
from outbox.destinations.base import Destination
from outbox.errors import (
    InvalidActionInput,
    OutboxError,
    RiskNotConfirmed,
)
from outbox.guidance import available_actions, next_step, retry_is_risky
from outbox.hold_lines import destination_holds_now
from outbox.models import Handoff
from outbox.page_clock import page_now
from outbox.redaction import redact
from outbox.selectors import (
    handoff_timeline,
    handoffs_in,
    instance_handoffs,
    instance_status,
    last_successful_step,
)
from outbox.sent_requests import sent_request
from outbox.services import instance_compensation_plan
from reconciliation.errors import InvalidRepairInput, ReconciliationError
from reconciliation.selectors import live_findings_of, repairs_of


def _visible_or_404(request: HtmxHttpRequest, pk: int) -> Handoff:
    # Who acknowledged it is read with it (its owner already is): the page names them, in a query of its own
    # while rendering otherwise (issue 40). Still only within the user's workspaces, as `handoff_visible`.
    handoff = (
        handoffs_in(workspace_ids_for(request.user))
        .select_related("acknowledged_by")
        .filter(pk=pk)
        .first()
    )
    if handoff is None:
        raise Http404("no such handoff")
    return handoff


def _panel_context(request: HtmxHttpRequest, handoff: Handoff, result: dict | None = None) -> dict:
    attempts, events = map(list, handoff_timeline(handoff))  # once, for the last step too
    is_operator = is_operator_of(request.user.pk, handoff.workspace_id)
    source = revision_by_id(handoff.source_id)
    # Findings carry a key of the handoff's own workspace, so the handoff's scope check covers them.
    findings = list(live_findings_of(handoff.action_key).select_related("owner"))
    # Its destination's holds (every live one, the next scheduled), read only while the handoff is open.
    hold = (
        shown_holds(handoff, destination_holds_now(handoff.destination))
        if handoff.is_open
        else None
    )
    destination, label = _destination_of(handoff)
    repairs = list(repairs_of(handoff))
    instance = _instance_of(handoff)
    return {
        **_evidence_context(handoff, findings, repairs, hold, instance, attempts),
        "handoff": handoff,
        "payload": redact(handoff.payload),
        "sends": sent_request(handoff, destination),
        "attempts": attempts,
        "events": events,
        "findings": [
            {
                "finding": f,
                "source": redact(f.source_evidence),
                "receiver": redact(f.receiver_evidence),
            }
            for f in findings
        ],
        "guidance": next_step(handoff, findings, holds=hold),
        "destination_holds": hold,
        "actions": (
            available_actions(handoff, findings, destination_held=destination_held(hold))
            if is_operator
            else []
        ),
        "risky_retry": retry_is_risky(handoff),
        "in_backoff": handoff.in_backoff,
        "is_operator": is_operator,
        "operators": operators_of([handoff.workspace_id]) if is_operator else [],
        "correction": _correction(handoff) if is_operator else None,
        "source": source,
        "poll": handoff.with_dispatcher,
        "version": handoff.updated_at.isoformat(),
        "result": result,
        "instance": _instance_context(handoff, instance, is_operator),
        "destination": label,
        "case_hold": handoff_case_held(handoff, page_now()),
    }


def _evidence_context(
    handoff: Handoff,
    findings: list,
    repairs: list,
    hold,
    instance: list[Handoff] | None,
    attempts: list,
) -> dict:
    """The evidence words of the page (`console/evidence_words.py`): how the outcome is known, whether the
    task is there now, the work, and where it stands with the owner of its next step."""
    there = task_now(handoff, findings, repairs)
    return {
        "repairs": repairs,
        "task_gone": there if there is not None and not there.found else None,
        "task_created": task_words_now(handoff, findings, repairs),
        "work_words": work_words(handoff, repairs),
        "standing": _standing(handoff, findings, repairs, hold, instance),
        "last_successful_step": last_step_words(handoff, repairs)
        or last_successful_step(handoff, attempts),
        "claims": handoff_claims(handoff, findings, repairs),
    }


def _standing(
    handoff: Handoff, findings: list, repairs: list, hold, instance: list[Handoff] | None
) -> StatusLine:
    """Where the handoff stands, what happens next and who owns that: the requester's line for the same step
    (`console/step_status.py`), so the operator and the requester read one owner. While it is being reversed
    its line names the owner of its compensation (its own, or a later step's that goes first), from every
    handoff of its instance."""
    others = [h for h in instance or [] if h.pk != handoff.pk] if _being_reversed(handoff) else []
    evidence = Evidence(
        handoffs=[handoff, *others],
        now=page_now(),
        findings={handoff.action_key: findings},
        destinations={handoff.destination: hold} if hold is not None else {},
        repairs={handoff.action_key: repairs},
    )
    return step_line("This step", handoff, evidence)


def _destination_of(handoff: Handoff) -> tuple[Destination | None, str]:
    """The handoff's destination (None when no dispatcher serves it) and its label, read once per page."""
    try:
        destination = destination_named(handoff.destination)
    except DestinationUnavailable as exc:
        return None, f"{handoff.destination} ({exc})"
    return destination, destination.describe()


def _correction(handoff: Handoff) -> HandoffCorrectionForm:
    """The operator's correction form: the approved payload's editable fields, typed by the rules' schema."""
    rules = rules_for(handoff.workflow)  # once: the form's types and its missing fields
    return HandoffCorrectionForm(schema=rules.schema, fields=correction_fields(handoff, rules))


def _instance_of(handoff: Handoff) -> list[Handoff] | None:
    """Every handoff of the handoff's workflow instance, read once for the page when it uses them: a step's
    instance panel, and the line of a handoff being reversed (`_standing`). None otherwise."""
    if handoff.step or _being_reversed(handoff):
        return instance_handoffs(handoff.instance_key)
    return None


def _being_reversed(handoff: Handoff) -> bool:
    return bool(handoff.compensation_state and handoff.instance_key)


def _instance_context(
    handoff: Handoff, steps: list[Handoff] | None, is_operator: bool
) -> dict | None:
    """The workflow instance a step belongs to (`steps`, every handoff of it): its steps side by side,
    where it stands, and what compensating it would do (shown before an operator confirms)."""
    if not handoff.step:
        return None
    plan = instance_compensation_plan(steps)
    return {
        "key": handoff.instance_key,
        "steps": steps,
        "status": instance_status(steps),
        "plan": plan,
        "can_compensate": is_operator and not plan.empty and not plan.blockers,
        "hold_whole_by_default": HOLD_WHOLE_CASE_BY_DEFAULT,  # the hold form's box
    }


@require_GET
@login_required
def handoff_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    handoff = _visible_or_404(request, pk)
    if request.htmx:
        # The panel polls while the dispatcher works on the handoff; unchanged means nothing to swap.
        if request.GET.get("since") == handoff.updated_at.isoformat():
            return HttpResponse(status=204)
        return render(request, "outbox/detail.html#handoff-panel", _panel_context(request, handoff))
    return render(
        request,
        "outbox/detail.html",
        _panel_context(request, handoff),
    )


def handoff_action(view):
    """Shared frame of every handoff action: POST only, signed in, visible (404), operator (403),
    domain errors shown as messages, then the row, the panel or (without htmx) a redirect."""

    @wraps(view)
    @require_POST
    @login_required
    def wrapper(request: HtmxHttpRequest, pk: int) -> HttpResponse:
        handoff = _visible_or_404(request, pk)
        if not is_operator_of(request.user.pk, handoff.workspace_id):
            result = {
                "level": "error",
                "text": "Not allowed: handoff actions need the operator role in workspace "
                f"{handoff.workspace_id}. Ask an operator, or an administrator for the role.",
            }
            return _respond(request, handoff.pk, result, status=403)
        try:
            result = view(request, handoff)
            status = 200
        except RiskNotConfirmed as exc:
            result = {"level": "warning", "text": str(exc), "confirm_risk": True}
            status = 200
        except InvalidPayload as exc:
            result = {"level": "error", "text": "Not done: " + "; ".join(exc.reasons)}
            status = 422
        except (InvalidActionInput, InvalidRepairInput) as exc:
            result = {"level": "error", "text": f"Not done: {exc}."}
            status = 422
        except (OutboxError, ApprovalsError, ReconciliationError) as exc:
            result = {"level": "error", "text": f"Not done: {exc}."}
            status = 409
        return _respond(request, handoff.pk, result, status=status)

    return wrapper


def _respond(request: HtmxHttpRequest, pk: int, result: dict, *, status: int = 200) -> HttpResponse:
    handoff = Handoff.objects.select_related("owner", "case_hold").get(pk=pk)
    if request.htmx and request.POST.get("render") == "row":
        table_rows([handoff], [handoff.workspace_id])
        context = {
            "h": handoff,
            "operator_ws": set(workspace_ids_for(request.user, Role.OPERATOR)),
            "row_result": result,
        }
        return render(request, "outbox/list.html#handoff-row", context, status=status)
    if request.htmx:
        response = render(
            request,
            "outbox/detail.html#handoff-panel",
            _panel_context(request, handoff, result),
            status=status,
        )
        # The header's counts, swapped out of band: a repair or a retry changes what needs a person.
        response.write(render_to_string("_workspaces.html", {"oob": True}, request=request))
        return response
    level = {"success": messages.SUCCESS, "warning": messages.WARNING, "error": messages.ERROR}.get(
        result.get("level"), messages.INFO
    )
    messages.add_message(request, level, result["text"])
    if status == 403:
        return render(
            request,
            "outbox/detail.html",
            _panel_context(request, handoff),
            status=403,
        )
    return redirect("outbox:detail", pk=pk)
