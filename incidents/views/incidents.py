"""Incidents: the list, one incident's page (what happened, the members, the timeline), acknowledge, resolve.

Thin: parse, authorize (operators, scoped to their workspaces: an incident of another workspace is a 404,
as one that does not exist; the fallback on-call also reads and acts on the incidents they own), call one
selector or service, render. An incident is of one workspace: nothing of another's is listed or counted.
"""

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.views.decorators.http import require_GET, require_POST

from approvals.models import Role
from approvals.selectors import workspace_ids_for
from incidents.selectors.incidents import (
    incident_detail_for,
    incident_visible,
    incidents_for,
    owns_incidents,
    sees_security_incidents,
)
from incidents.selectors.replays import replays_of_incident
from incidents.services.operator import (
    InvalidIncidentTransition,
    incident_acknowledge,
    incident_resolve_by_person,
)
from incidents.text import incident_summary
from lib.htmx import HtmxHttpRequest
from lib.querystring import id_or_none

LIST_SIZE = 100


def _scope(request: HtmxHttpRequest) -> list[int]:
    ids = workspace_ids_for(request.user, Role.OPERATOR)
    if (
        not ids
        and not sees_security_incidents(request.user)
        and not owns_incidents(request.user.pk)
    ):
        raise PermissionDenied("incidents are for operators of a workspace")
    return ids


@require_GET
@login_required
def incident_list(request: HtmxHttpRequest) -> HttpResponse:
    scope = _scope(request)
    live_only = request.GET.get("state", "live") != "all"
    rows = incidents_for(
        scope,
        security=sees_security_incidents(request.user),
        live_only=live_only,
        owner_id=request.user.pk,
    )[:LIST_SIZE]
    return render(
        request,
        "incidents/list.html",
        {"incidents": rows, "live_only": live_only, "list_size": LIST_SIZE},
    )


def _visible_or_404(request: HtmxHttpRequest, pk: int):
    incident = incident_visible(
        _scope(request),
        pk,
        security=sees_security_incidents(request.user),
        owner_id=request.user.pk,
    )
    if incident is None:
        raise Http404("no such incident")
    return incident


@require_GET
@login_required
def incident_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    scope = _scope(request)
    incident = _visible_or_404(request, pk)
    after = id_or_none(request.GET.get("after", "")) or 0
    context = incident_detail_for(
        incident, scope, security=sees_security_incidents(request.user), after=after
    )
    context["replays"] = replays_of_incident(incident, scope)
    return render(request, "incidents/detail.html", context)


def _act(request: HtmxHttpRequest, pk: int, service) -> HttpResponse:
    incident = _visible_or_404(request, pk)
    error = ""
    try:
        incident = service(
            incident_id=incident.pk, actor=request.user, note=request.POST.get("note", "")[:2000]
        )
    except InvalidIncidentTransition as exc:
        error = str(exc)
    if request.htmx or error:
        # The state's part of the page, with the summary its SLA and owner lines are read from.
        summary = incident_summary(incident, workspace_id=incident.workspace_id)
        return render(
            request,
            "incidents/detail.html#incident-state",
            {"incident": incident, "summary": summary, "error": error},
            status=409 if error else 200,
        )
    return redirect("incidents:detail", pk=incident.pk)


@require_POST
@login_required
def incident_ack(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    return _act(request, pk, incident_acknowledge)


@require_POST
@login_required
def incident_resolve(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    return _act(request, pk, incident_resolve_by_person)


@require_GET
@login_required
def incident_open_count(request: HtmxHttpRequest) -> HttpResponse:
    """The nav's figure beside "Incidents": the open and acknowledged incidents of the person's
    workspaces, and the security incidents for a holder of their permission (fetched after the page, so
    that no page pays a query for it)."""
    scope = workspace_ids_for(request.user, Role.OPERATOR)
    security = sees_security_incidents(request.user)
    count = (
        incidents_for(scope, security=security, owner_id=request.user.pk).count()
        if scope or security
        else 0
    )
    # Stripped: with nothing open the answer is empty, so the nav shows nothing, not an empty pill.
    pill = render_to_string("incidents/_open_count.html", {"count": count}, request=request)
    return HttpResponse(pill.strip())
