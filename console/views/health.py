"""Health dashboard, reconciliation findings and runs, and /metrics.

Thin: parse, authorize (operators, scoped to their workspaces), call one selector or service, render.
"""

import hmac

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from approvals.models import Role
from approvals.on_call import fallback_duty_for
from approvals.selectors import workspace_ids_for
from incidents import metrics
from incidents.selectors.channels import alert_channel_delivery, channel_notifications
from incidents.selectors.incidents import incident_health, sees_security_incidents
from lib.htmx import HtmxHttpRequest
from lib.querystring import id_or_none
from outbox.limit_rules import SET_LIMITS_PERMISSION, InvalidLimit
from outbox.redaction import redact
from outbox.services.limits import destination_set_limits
from reconciliation import selectors, services
from reconciliation.charts import bar_chart
from reconciliation.errors import InvalidFindingTransition, NoteRequired
from reconciliation.models import FindingKind, FindingStatus
from reconciliation.selectors.findings import LIVE

FINDINGS_PAGE = 200


def _operator_scope(request: HtmxHttpRequest) -> list[int]:
    ids = workspace_ids_for(request.user, Role.OPERATOR)
    if not ids:
        raise PermissionDenied("the health dashboard is for operators of a workspace")
    return ids


def _workspace_param(request: HtmxHttpRequest, scope: list[int]) -> int | None:
    raw = request.GET.get("workspace", "")
    if not raw:
        return None
    workspace = id_or_none(raw)
    if workspace not in scope:
        raise Http404("no such workspace")
    return workspace


@require_GET
@login_required
def health(request: HtmxHttpRequest) -> HttpResponse:
    scope = _operator_scope(request)
    workspace = _workspace_param(request, scope)
    summary = selectors.health_summary_shared(scope, workspace=workspace)
    destinations = selectors.destinations_overview()
    return render(
        request,
        "reconciliation/health.html",
        {
            **summary,
            "scope": scope,
            "workspace": workspace,
            "delivered_chart": bar_chart(summary["series"], "delivered"),
            "failed_chart": bar_chart(summary["series"], "failed"),
            "paused_destinations": selectors.paused_by_breaker(destinations),
            "destinations": destinations,
            "may_set_limits": request.user.has_perm(SET_LIMITS_PERMISSION),
            "incidents": incident_health([workspace] if workspace else scope),
            # A workspace chosen narrows the page to it; the security incidents' notifications are of none.
            "alert_channels": alert_channel_delivery(
                [workspace] if workspace else scope,
                security=workspace is None and sees_security_incidents(request.user),
            ),
            "fallback_duty": fallback_duty_for(request.user),
            "figures_seconds": settings.HEALTH_FIGURES_SECONDS,
        },
    )


@require_POST
@login_required
def destination_limits(request: HtmxHttpRequest, name: str) -> HttpResponse:
    """An operator with the set_destination_limits permission sets a destination's limits (blank = unlimited).
    A destination serves every workspace, so an operator role alone is not enough: 403. Bad input: 422 with the
    reason, nothing written."""
    _operator_scope(request)
    if not request.user.has_perm(SET_LIMITS_PERMISSION):
        raise PermissionDenied(
            "a destination's limits apply to every workspace: only people with the "
            "'set destination limits' permission change them"
        )
    if name not in selectors.destination_names():
        raise Http404("no such destination")
    error = ""
    try:
        destination_set_limits(
            name=name,
            max_concurrency=request.POST.get("max_concurrency", ""),
            max_requests_per_second=request.POST.get("max_requests_per_second", ""),
            actor=request.user,
            reason=request.POST.get("reason", ""),
        )
    except InvalidLimit as exc:
        error = str(exc)
    status = 422 if error else 200
    if request.htmx:
        [destination] = selectors.destinations_overview(name)
        return render(
            request,
            "reconciliation/health.html#destination-limits",
            {
                "destination": destination,
                "error": error,
                "saved": not error,
                "posted": request.POST,
                "may_set_limits": True,
            },  # checked above
            status=status,
        )
    if error:
        return render(
            request,
            "reconciliation/destination_limits_refused.html",
            {"name": name, "error": error},
            status=status,
        )
    return redirect("reconciliation:health")


@require_GET
@login_required
def drilldown(request: HtmxHttpRequest, figure: str) -> HttpResponse:
    scope = _operator_scope(request)
    workspace = _workspace_param(request, scope)
    ids = [workspace] if workspace else scope
    if figure == "duplicates":
        rows, title = selectors.duplicate_attempts(ids), "Duplicate-effect preventions"
    elif figure == "interventions":
        rows, title = selectors.manual_interventions(ids), "Manual interventions"
    elif figure == "notifications":
        # One alert channel's row of Health, listed: the same workspaces and the same permission as counted.
        destination = request.GET.get("destination", "")
        rows = channel_notifications(
            ids,
            destination=destination,
            security=workspace is None and sees_security_incidents(request.user),
        )
        title = f"Alert notifications to {destination} not delivered yet"
    else:
        raise Http404("no such figure")
    return render(
        request,
        "reconciliation/drilldown.html",
        {"figure": figure, "title": title, "rows": rows, "workspace": workspace},
    )


def _findings_scope(request: HtmxHttpRequest):
    scope = _operator_scope(request)
    return selectors.findings_visible_to(scope, include_unscoped=request.user.is_staff), scope


@require_GET
@login_required
def findings(request: HtmxHttpRequest) -> HttpResponse:
    visible, scope = _findings_scope(request)
    workspace = _workspace_param(request, scope)
    status = request.GET.get("status", LIVE)
    kind = request.GET.get("kind", "")
    rows = selectors.findings_filtered(
        visible,
        status=status,
        kind=kind,
        workspace=workspace,
        text=request.GET.get("q", ""),
        outcome_validation=bool(request.GET.get("outcome_validation")),
    )[:FINDINGS_PAGE]
    return render(
        request,
        "reconciliation/findings.html",
        {
            "findings": [_row(f) for f in rows],
            "kinds": FindingKind.choices,
            "kind": kind,
            "status": status,
            "statuses": [(LIVE, "open or acknowledged"), *FindingStatus.choices],
            "page_size": FINDINGS_PAGE,
            # The last run that covered what the page shows: the chosen workspace's, as on the health page.
            "last_run": selectors.last_run(workspace),
        },
    )


def _row(finding) -> dict:
    return {
        "finding": finding,
        "source": redact(finding.source_evidence),
        "receiver": redact(finding.receiver_evidence),
    }


def _finding_action(request: HtmxHttpRequest, pk: int, service) -> HttpResponse:
    visible, _scope = _findings_scope(request)
    finding = get_object_or_404(visible, pk=pk)
    error = ""
    try:
        finding = service(
            finding_id=finding.pk, actor=request.user, note=request.POST.get("note", "").strip()
        )
    except (InvalidFindingTransition, NoteRequired) as exc:
        error = str(exc)
    context = {"row": _row(finding), "error": error}
    if request.htmx:
        return render(
            request,
            "reconciliation/findings.html#finding-row",
            context,
            status=400 if error else 200,
        )
    return render(
        request, "reconciliation/finding_done.html", context, status=400 if error else 200
    )


@require_POST
@login_required
def finding_acknowledge(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    return _finding_action(request, pk, services.finding_acknowledge)


@require_POST
@login_required
def finding_resolve(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    return _finding_action(request, pk, services.finding_resolve)


@require_POST
@login_required
def workspace_reconcile(request: HtmxHttpRequest) -> HttpResponse:
    """Reconcile now, for one workspace: runs at once when small (the answer says what it found), else queued."""
    workspace = id_or_none(request.POST.get("workspace", ""))
    if workspace not in workspace_ids_for(request.user):
        raise Http404("no such workspace")
    if workspace not in workspace_ids_for(request.user, Role.OPERATOR):
        raise PermissionDenied(f"reconciling workspace {workspace} needs the operator role there")
    run = services.reconciliation_start_for_workspace(workspace_id=workspace, actor=request.user)
    if request.htmx:
        return render(request, "reconciliation/health.html#reconcile-result", {"started": run})
    return redirect("reconciliation:run", pk=run.pk)


@require_GET
@login_required
def runs(request: HtmxHttpRequest) -> HttpResponse:
    scope = _operator_scope(request)
    return render(
        request,
        "reconciliation/runs.html",
        {"runs": selectors.runs_visible_to(scope).order_by("-started_at", "-id")[:50]},
    )


@require_GET
@login_required
def run_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    visible, scope = _findings_scope(request)
    run = get_object_or_404(selectors.runs_visible_to(scope), pk=pk)
    rows = visible.filter(last_run=run).order_by("kind", "action_key")[:FINDINGS_PAGE]
    return render(
        request, "reconciliation/run.html", {"run": run, "findings": [_row(f) for f in rows]}
    )


@require_GET
def metrics_view(request: HtmxHttpRequest) -> HttpResponse:
    """Prometheus exposition, behind a bearer token. With no token configured it serves nothing."""
    token = settings.METRICS_TOKEN
    if not token:
        return HttpResponse(
            "metrics disabled: METRICS_TOKEN is not set\n",
            status=503,
            content_type="text/plain; charset=utf-8",
        )
    header = request.headers.get("Authorization", "")
    scheme, _, offered = header.partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(
        offered.strip().encode(), token.encode()
    ):
        response = HttpResponse(
            "a bearer token is required\n", status=401, content_type="text/plain; charset=utf-8"
        )
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    return HttpResponse(generate_latest(metrics.registry()), content_type=CONTENT_TYPE_LATEST)
