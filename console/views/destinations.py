"""The Destinations page: each receiving system, its state, what waits for it, its contract in words; and one
destination's page with its events, the operator's pause, resume and maintenance window, and a connection
test.

Operators of a workspace see every destination (a destination serves every workspace) and the counts of
their own workspaces' handoffs. Pausing, resuming and scheduling a window stop or start deliveries for every
workspace, so they need the destination permission too (the one that sets limits): 403 otherwise. So does a
connection test, a call to a system that serves every workspace (one per destination every few seconds:
`outbox/services/connection_tests.py`).
"""

import json
from dataclasses import dataclass
from functools import wraps

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from approvals.models import Role
from approvals.selectors import workspace_ids_for
from lib.htmx import HtmxHttpRequest
from lib.moments import BadMoment, parse_moment
from lib.querystring import whole_number
from outbox.destinations.registry import (
    DestinationUnavailable,
    default_destination_name,
    describe_contract,
    destination_from_row,
    row_config,
    secret_sources,
    seed_config,
)
from outbox.limit_rules import SET_LIMITS_PERMISSION
from outbox.models import DestinationConfig, DestinationEvent
from outbox.selectors import DestinationSummary, destination_summaries
from outbox.services.connection_tests import (
    CONNECTION_TEST_EVERY_SECONDS,
    ConnectionTestRefused,
    ConnectionTestTooSoon,
    destination_connection_test,
    destination_contract_test,
)
from outbox.services.destination_probes import PROBED_KINDS
from outbox.services.destination_windows import (
    MAX_PAUSE_MINUTES,
    InvalidWindow,
    destination_pause_by_operator,
    destination_resume_by_operator,
    destination_schedule_window,
)


@dataclass(frozen=True)
class DestinationView:
    summary: DestinationSummary
    kind: str
    enabled: bool
    contract: str
    problem: str
    secrets: list

    @property
    def name(self) -> str:
        return self.summary.name

    @property
    def probeable(self) -> bool:
        """Whether "Run the whole contract" is offered (destination_probes.py)."""
        return self.kind in PROBED_KINDS


def _scope(request: HtmxHttpRequest) -> list[int]:
    ids = workspace_ids_for(request.user, Role.OPERATOR)
    if not ids:
        raise PermissionDenied("the destinations are for operators of a workspace")
    return ids


def _configs() -> dict[str, tuple[dict, bool, tuple | None]]:
    """Each destination's whole configuration, whether it is enabled, and its row as stored (kind, enabled,
    configuration; None for the default destination without a row), from one read of the rows."""
    configs = {row.name: row for row in DestinationConfig.objects.all()}
    whole = {
        # The configuration as the database stores it (JSON text), as `destination_from_row` reads it.
        name: (row_config(row), row.enabled, (row.kind, row.enabled, json.dumps(row.config)))
        for name, row in configs.items()
    }
    whole.setdefault(default_destination_name(), (seed_config(), True, None))
    return whole


def _described(name: str, enabled: bool, row: tuple | None) -> tuple[str, str]:
    """Its contract in words, or why it cannot be used: built from the row the page read (as
    `destination_named` builds it from its own read of the row, a query a destination: issue 40)."""
    if not enabled:
        return "", "disabled: the dispatchers do not serve it"
    try:
        return describe_contract(destination_from_row(name, row)), ""
    except DestinationUnavailable as exc:
        return "", str(exc)


def _views(
    scope: list[int], names: list[str] | None = None, configs: dict | None = None
) -> list[DestinationView]:
    configs = configs if configs is not None else _configs()
    wanted = names if names is not None else sorted(configs)
    views = []
    for summary in destination_summaries(wanted, scope):
        config, enabled, row = configs.get(summary.name, ({}, False, None))
        contract, problem = _described(summary.name, enabled, row)
        views.append(
            DestinationView(
                summary=summary,
                kind=config.get("kind", "http"),
                enabled=enabled,
                contract=contract,
                problem=problem,
                secrets=secret_sources(config),
            )
        )
    return views


@require_GET
@login_required
def destination_list(request: HtmxHttpRequest) -> HttpResponse:
    views = _views(_scope(request))
    return render(request, "outbox/destinations.html", {"destinations": views})


def _known_or_404(request: HtmxHttpRequest, name: str) -> tuple[list[int], dict]:
    """The viewer's operator workspaces (403 without any) and the destinations (404 for another name)."""
    scope, configs = _scope(request), _configs()
    if name not in configs:
        raise Http404("no such destination")
    return scope, configs


def _one(request: HtmxHttpRequest, name: str) -> DestinationView:
    scope, configs = _known_or_404(request, name)
    [view] = _views(scope, [name], configs)
    return view


def _detail_context(request: HtmxHttpRequest, view: DestinationView, result=None) -> dict:
    return {
        "destination": view,
        "events": DestinationEvent.objects.filter(destination=view.name).order_by("-at", "-id")[
            :50
        ],
        "holds": view.summary.holds,
        "may_pause": request.user.has_perm(SET_LIMITS_PERMISSION),
        "test_every_seconds": CONNECTION_TEST_EVERY_SECONDS,
        "result": result,
    }


@require_GET
@login_required
def destination_detail(request: HtmxHttpRequest, name: str) -> HttpResponse:
    view = _one(request, name)
    return render(request, "outbox/destination_detail.html", _detail_context(request, view))


LEVELS = {"success": messages.SUCCESS, "warning": messages.WARNING, "info": messages.INFO}


def _answer(request: HtmxHttpRequest, name: str, result: dict, status: int) -> HttpResponse:
    if status == 200 and not request.htmx:
        messages.add_message(request, LEVELS.get(result["level"], messages.ERROR), result["text"])
        return redirect("destinations:detail", name=name)
    context = _detail_context(request, _one(request, name), result)
    return render(request, "outbox/destination_detail.html", context, status=status)


def _may_pause(request: HtmxHttpRequest, name: str, why: str = "pausing a destination") -> None:
    _known_or_404(request, name)
    if not request.user.has_perm(SET_LIMITS_PERMISSION):
        raise PermissionDenied(
            f"{why} acts on a system that serves every workspace: only people with the "
            "'set destination limits' permission do it"
        )


def _minutes(raw: str) -> float | None:
    if not raw.strip():
        return None
    minutes = whole_number(raw.strip(), high=MAX_PAUSE_MINUTES)
    if minutes is None:
        raise InvalidWindow(
            f"minutes must be a whole number from 1 to {MAX_PAUSE_MINUTES} (empty: until resumed)"
        )
    return minutes * 60.0


def operator_window_action(refused: str):
    """The frame of pause, resume and window: POST, signed in, the destination exists (404), the
    destination permission (403), a time that cannot be read a 400 and the service's refusal a 422, each
    with its reason (`refused`: "Not paused")."""

    def decorate(view):
        @wraps(view)
        @require_POST
        @login_required
        def wrapper(request: HtmxHttpRequest, name: str) -> HttpResponse:
            _may_pause(request, name)
            try:
                text = view(request, name)
            except BadMoment as exc:
                return _answer(request, name, {"level": "error", "text": f"{refused}: {exc}."}, 400)
            except InvalidWindow as exc:
                return _answer(request, name, {"level": "error", "text": f"{refused}: {exc}."}, 422)
            return _answer(request, name, {"level": "success", "text": text}, 200)

        return wrapper

    return decorate


@operator_window_action("Not paused")
def destination_pause(request: HtmxHttpRequest, name: str) -> str:
    destination_pause_by_operator(
        name=name,
        actor=request.user,
        reason=request.POST.get("reason", ""),
        for_seconds=_minutes(request.POST.get("minutes", "")),
    )
    return f"{name} is paused."


def _hold_id(raw: str) -> int:
    number = whole_number(raw, high=2**62)
    if number is None:
        raise InvalidWindow(f"hold must be a hold's number; got {raw[:20]!r}")
    return number


@operator_window_action("Not resumed")
def destination_resume(request: HtmxHttpRequest, name: str) -> str:
    hold_id = request.POST.get("hold", "").strip()
    health = destination_resume_by_operator(
        name=name,
        actor=request.user,
        reason=request.POST.get("reason", ""),
        hold_id=_hold_id(hold_id) if hold_id else None,
        probe=bool(request.POST.get("probe")),
    )
    if health.paused_by_breaker:
        # Asked at once and not answered (the service says so in the destination's events).
        return f"{name} did not answer yet: it is probed with the next handoff and resumes when that succeeds."
    return f"{name} resumed: its waiting handoffs are sent now."


@operator_window_action("Not scheduled")
def destination_window(request: HtmxHttpRequest, name: str) -> str:
    destination_schedule_window(
        name=name,
        actor=request.user,
        reason=request.POST.get("reason", ""),
        starts_at=parse_moment(request.POST.get("starts_at", ""), field="starts_at"),
        ends_at=parse_moment(request.POST.get("ends_at", ""), field="ends_at"),
    )
    return "Window scheduled."


@require_POST
@login_required
def destination_test(request: HtmxHttpRequest, name: str) -> HttpResponse:
    _may_pause(request, name, why="a connection test")
    try:
        if request.POST.get("contract") == "whole":
            result = destination_contract_test(
                name=name, asked_by=request.user.get_username(), actor=request.user
            )
        else:
            result = destination_connection_test(name=name, asked_by="connection-test")
    except ConnectionTestRefused as exc:
        return _answer(request, name, {"level": "error", "text": f"Not tested: {exc}."}, 409)
    except ConnectionTestTooSoon as exc:
        answer = _answer(request, name, {"level": "error", "text": f"Not tested: {exc}."}, 429)
        answer["Retry-After"] = str(exc.retry_after)
        return answer
    return _answer(
        request, name, {"level": result.level, "text": result.text, "lines": result.lines}, 200
    )
