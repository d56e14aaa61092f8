"""Observation mode that compares: the observed cases of each rule version beside what the current process did,
their agreement, the owner's explanations, and the owner's confirmation that a workflow goes live.

Thin: parse, authorize (a workspace the user is not a member of is a 404 as everywhere; recording is for the
workspace's operators and the workflow's owner, explaining and going live for the owner: 403 with the reason),
call one service, render. docs/observation.md."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from approvals import agreement
from approvals.errors import InvalidPayload
from approvals.models import Mode, ObservedOutcome, WorkflowMode
from approvals.selectors import workspace_ids_for
from approvals.services.go_live import GoLiveRefused, go_live_refusal, workflow_go_live
from approvals.services.observation import (
    ObservationRefused,
    observed_outcome_explain,
    observed_outcome_record,
)
from approvals.services.observation_import import observed_outcomes_import
from console.claims import mode_claim
from console.observation_forms import ExplainForm, GoLiveForm, ImportForm, OutcomeForm
from lib.querystring import BadQueryValue, keyset_cursor, parse_keyset_cursor


def _member_workspace(request, workspace_id: int) -> int:
    if workspace_id not in workspace_ids_for(request.user):
        raise Http404("no such workspace among yours")
    return workspace_id


def _version_in(workspace_id: int, rule_version: str) -> str:
    """The rule version's workflow, if the workspace observed cases of it (else a 404)."""
    case = agreement.observed_cases(workspace_id, rule_version).values("workflow").first()
    if case is None:
        row = ObservedOutcome.objects.filter(workspace_id=workspace_id, rule_version=rule_version)
        case = row.values("workflow").first()
    if case is None:
        raise Http404("no observed cases of this rule version in this workspace")
    return case["workflow"]


# What a workflow's mode means for its approved handoffs, as the observation of one workflow says it.
MODE_MEANING = {
    Mode.OBSERVE: "approved handoffs are recorded, not sent",
    Mode.LIMITED: "approved handoffs are sent only for its allowed workspaces",
    Mode.LIVE: "approved handoffs are sent to the receiver",
}


def _index_filter(request) -> tuple[str, int | None]:
    """`?workflow=…&workspace=…` (as the mode badge of every screen naming a workflow links here): one
    workflow's rule versions, in one of the user's workspaces (another workspace, or a bad number, is a 404)."""
    workflow = request.GET.get("workflow", "").strip()[:40]
    raw = request.GET.get("workspace", "").strip()
    if not raw:
        return workflow, None
    if not raw.isdigit():
        raise Http404("no such workspace among yours")
    return workflow, _member_workspace(request, int(raw))


@login_required
@require_GET
def index(request):
    """Every rule version with observed cases in the user's workspaces, with its counts, its owner and its
    workflow's mode; one workflow's (in one workspace) with `?workflow=` (and `&workspace=`)."""
    workflow, workspace_id = _index_filter(request)
    scope = [workspace_id] if workspace_id is not None else workspace_ids_for(request.user)
    versions = agreement.observed_versions(scope)
    if workflow:
        versions = [row for row in versions if row["workflow"] == workflow]
    for row in versions:
        row["brief"] = agreement.brief_of(row["workflow"])
        row["mode"] = WorkflowMode.objects.effective(row["workflow"], row["workspace_id"])[0]
        row["mode_claim"] = mode_claim(row["workflow"], row["mode"])
    context = {"versions": versions, "workflow": workflow, "workspace_id": workspace_id}
    if workflow:
        context["mode"] = WorkflowMode.objects.effective(workflow, workspace_id)[0]
        context["mode_claim"] = mode_claim(workflow, context["mode"])
        context["mode_meaning"] = MODE_MEANING.get(context["mode"], "")
    return render(request, "console/observation_index.html", context)


def _agreement_context(request, workspace_id: int, rule_version: str, workflow: str) -> dict:
    try:
        after = parse_keyset_cursor(request.GET.get("after", ""), name="after")
    except BadQueryValue as exc:
        raise InvalidPayload([str(exc)]) from exc
    rows, more = agreement.disagreements_page(workspace_id, rule_version, after=after)
    return {
        "workspace_id": workspace_id,
        "rule_version": rule_version,
        "workflow": workflow,
        "brief": agreement.brief_of(workflow),
        "results": agreement.agreement_of(workspace_id, rule_version),
        "disagreements": rows,
        "next_cursor": keyset_cursor(rows[-1], field="recorded_at") if more else "",
        "unrecorded": agreement.unrecorded_cases(workspace_id, rule_version),
        "may_record": agreement.may_record(request.user, workspace_id, workflow),
        "is_owner": agreement.is_owner(request.user, workflow),
        "observing": WorkflowMode.objects.effective(workflow, workspace_id)[0] == Mode.OBSERVE,
        "import_form": ImportForm(),
        "explain_form": ExplainForm(),
    }


def _agreement_page(request, workspace_id, rule_version, *, status=200, reasons=()):
    workflow = _version_in(_member_workspace(request, workspace_id), rule_version)
    try:
        context = _agreement_context(request, workspace_id, rule_version, workflow)
    except InvalidPayload as exc:
        context, status, reasons = {"workspace_id": workspace_id}, 400, exc.reasons
    context["reasons"] = reasons
    return render(request, "console/observation_agreement.html", context, status=status)


@login_required
@require_GET
def agreement_page(request, workspace_id: int, rule_version: str):
    return _agreement_page(request, workspace_id, rule_version)


def _case_or_404(request, workspace_id: int, key: str):
    case = agreement.observed_case(_member_workspace(request, workspace_id), key)
    if case is None:
        raise Http404("no such observed case in this workspace")
    return case


@login_required
@require_http_methods(["GET", "POST"])
def record(request, workspace_id: int, key: str):
    """The form of what the current process did with one observed case, beside the product's plan."""
    case = _case_or_404(request, workspace_id, key)
    if not agreement.may_record(request.user, workspace_id, case.workflow):
        raise PermissionDenied(
            f"only an operator of workspace {workspace_id} or the owner of {case.workflow} records outcomes"
        )
    form = OutcomeForm(request.POST or None)
    status = 200
    if request.method == "POST":
        if form.is_valid():
            try:
                stored = observed_outcome_record(
                    workspace_id=workspace_id, entry=form.entry(case.action_key), actor=request.user
                )
            except InvalidPayload as exc:
                form.add_error(None, "; ".join(exc.reasons))
            else:
                verdict = "agrees with" if stored.agrees else "disagrees with"
                messages.success(request, f"Recorded: {case.action_key} {verdict} the plan.")
                return redirect("observation:agreement", workspace_id, case.rule_version)
        status = 422
    context = {"case": case, "planned": agreement.planned_steps(case), "form": form}
    return render(request, "console/observation_record.html", context, status=status)


@login_required
@require_POST
def import_outcomes(request, workspace_id: int, rule_version: str):
    """A CSV of outcomes, all rows or none; refused rows are named on the page (422), nothing written."""
    workflow = _version_in(_member_workspace(request, workspace_id), rule_version)
    if not agreement.may_record(request.user, workspace_id, workflow):
        raise PermissionDenied(
            f"only an operator of workspace {workspace_id} or the owner of {workflow} imports outcomes"
        )
    form = ImportForm(request.POST, request.FILES)
    if not form.is_valid():
        reasons = [error for errors in form.errors.values() for error in errors]
        return _agreement_page(request, workspace_id, rule_version, status=422, reasons=reasons)
    try:
        rows = observed_outcomes_import(
            workspace_id=workspace_id,
            rule_version=rule_version,
            data=form.cleaned_data["file"].read(),
            actor=request.user,
        )
    except InvalidPayload as exc:
        return _agreement_page(request, workspace_id, rule_version, status=422, reasons=exc.reasons)
    except ObservationRefused as exc:
        raise PermissionDenied(str(exc)) from exc
    messages.success(request, f"Imported {len(rows)} outcome(s).")
    return redirect("observation:agreement", workspace_id, rule_version)


@login_required
@require_POST
def explain(request, workspace_id: int, outcome_id: int):
    """The owner's explanation of one disagreement."""
    row = agreement.outcome_of(_member_workspace(request, workspace_id), outcome_id)
    if row is None:
        raise Http404("no such recorded outcome in this workspace")
    form = ExplainForm(request.POST)
    if not form.is_valid():
        reasons = [error for errors in form.errors.values() for error in errors]
        return _agreement_page(request, workspace_id, row.rule_version, status=422, reasons=reasons)
    try:
        observed_outcome_explain(
            workspace_id=workspace_id,
            outcome_id=outcome_id,
            explanation=form.cleaned_data["explanation"],
            actor=request.user,
        )
    except ObservationRefused as exc:
        raise PermissionDenied(str(exc)) from exc
    except InvalidPayload as exc:
        return _agreement_page(
            request, workspace_id, row.rule_version, status=422, reasons=exc.reasons
        )
    messages.success(request, f"Explained: {row.action_key}.")
    return redirect("observation:agreement", workspace_id, row.rule_version)


def _go_live_page(request, workflow: str, *, form, status=200, reasons=()):
    results = agreement.workflow_agreement(workflow)
    mode = WorkflowMode.objects.effective(workflow, None)[0]
    context = {
        "workflow": workflow,
        "brief": agreement.brief_of(workflow),
        "mode": mode,
        "observing": mode == Mode.OBSERVE,
        "results": results,
        "refusal": go_live_refusal(workflow=workflow, actor=request.user, results=results),
        "versions": [
            row
            for row in agreement.observed_versions(workspace_ids_for(request.user))
            if row["workflow"] == workflow
        ],
        "form": form,
        "reasons": reasons,
    }
    return render(request, "console/observation_go_live.html", context, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def go_live(request, workflow: str):
    """The observed results of a workflow and its owner's confirmation that it goes live (a non-owner sees
    the results and why they may not confirm; posting is refused with that reason, 403)."""
    if not workspace_ids_for(request.user) or agreement.brief_of(workflow) is None:
        raise Http404("no such observed workflow")
    if request.method == "GET":
        return _go_live_page(request, workflow, form=GoLiveForm())
    form = GoLiveForm(request.POST)
    if not form.is_valid():
        return _go_live_page(request, workflow, form=form, status=422)
    try:
        workflow_go_live(
            workflow=workflow,
            actor=request.user,
            confirmation=form.cleaned_data["confirmation"],
            reason=form.cleaned_data["reason"],
        )
    except GoLiveRefused as exc:
        if not agreement.is_owner(request.user, workflow):
            raise PermissionDenied(str(exc)) from exc
        return _go_live_page(request, workflow, form=form, status=422, reasons=[str(exc)])
    messages.success(request, f"{workflow} is live: approved handoffs are sent from now on.")
    return redirect(reverse("observation:index"))
