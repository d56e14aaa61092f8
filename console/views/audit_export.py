"""The Audit export page: choose a workspace, a period and a format; the file comes back as a download.

Thin: parse, call `audit_export` (which authorizes, reads and records the export), answer. A workspace the
user may not see is a 404 as everywhere; a member without the operator role gets a 403; a date that cannot be
read a 400 and a period or format the export refuses a 422, with the reasons, nothing recorded."""

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET, require_POST

from approvals.errors import ApprovalDenied, InvalidPayload, WorkspaceNotFound
from approvals.models import Role, Workspace
from approvals.selectors import workspace_ids_for
from console.audit_trail.export import audit_export
from console.audit_trail.period import parse_period
from lib.moments import BadMoment
from lib.querystring import id_or_none
from outbox.services.call_limits import calls_limited

TEMPLATE = "console/audit_export.html"


def _workspaces(user):
    """What the form offers: every workspace for support staff, the operator's own otherwise."""
    if user.is_staff:
        return Workspace.objects.order_by("pk")
    return Workspace.objects.filter(pk__in=workspace_ids_for(user, Role.OPERATOR)).order_by("pk")


def _page(request, *, status=200, reasons=(), values=None):
    context = {"workspaces": _workspaces(request.user), "reasons": reasons, "values": values or {}}
    return render(request, TEMPLATE, context, status=status)


@login_required
@require_GET
def audit_export_page(request):
    return _page(request)


@login_required
@require_POST
@calls_limited("audit export")
def audit_export_download(request):
    values = {
        name: request.POST.get(name, "") for name in ("workspace", "since", "until", "format")
    }
    workspace_id = id_or_none(values["workspace"])
    if workspace_id is None:
        return _page(request, status=422, reasons=["choose a workspace"], values=values)
    try:
        start, end = parse_period(values["since"], values["until"])
        result = audit_export(
            actor=request.user,
            workspace_id=workspace_id,
            start=start,
            end=end,
            fmt=values["format"],
            channel="console",
        )
    except BadMoment as exc:
        return _page(request, status=400, reasons=[str(exc)], values=values)
    except InvalidPayload as exc:
        return _page(request, status=422, reasons=exc.reasons, values=values)
    except WorkspaceNotFound as exc:
        raise Http404("no such workspace among yours") from exc
    except ApprovalDenied as exc:
        raise PermissionDenied(str(exc)) from exc
    response = HttpResponse(result.content, content_type=f"{result.media_type}; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{result.filename}"'
    response["X-Audit-Export"] = str(result.export.pk)
    return response
