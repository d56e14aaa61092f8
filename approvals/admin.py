import json

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.db import models
from django.http import HttpResponseBadRequest, HttpResponseRedirect
from django.utils.html import format_html

from approvals.admin_erasure import erase_subject_action, may_erase
from approvals.agreement import workflow_agreement
from approvals.errors import ApprovalsError
from approvals.models import (
    Approval,
    Membership,
    Mode,
    ObservedOutcome,
    PilotBrief,
    Request,
    RequestEvent,
    RequestReference,
    RoleChange,
    RuleVersion,
    SignOnIdentity,
    SignOnIdentityEvent,
    TriggerRecord,
    WorkflowMode,
    WorkflowModeChange,
    Workspace,
    WorkspaceWorkflow,
)
from approvals.request_search import requests_matching
from approvals.services.go_live import go_live_refusal, workflow_go_live
from approvals.services.memberships import membership_grant, membership_revoke
from approvals.services.observation import pilot_brief_set
from approvals.services.workflow_modes import workflow_mode_set
from lib.querystring import id_or_none
from lib.search_syntax import BadSearch
from outbox.redaction import redact


def redacted_json_display(field: models.Field):
    """A read-only admin field that shows a stored JSON value the way the console does: redacted."""

    def show(obj) -> str:
        shown = json.dumps(
            redact(getattr(obj, field.name)), indent=2, ensure_ascii=False, sort_keys=True
        )
        return format_html("<pre>{}</pre>", shown)

    show.__name__ = f"{field.name}_redacted"
    show.short_description = f"{field.verbose_name} (redacted)"
    return show


class RedactedJsonMixin:
    """Every JSON field of the model (payloads, documents, evidence) is shown through the one redaction
    function and never as stored: admin must not show what the console hides."""

    def _json_fields(self) -> list[models.Field]:
        return [f for f in self.model._meta.concrete_fields if isinstance(f, models.JSONField)]

    def get_exclude(self, request, obj=None):
        return [*(super().get_exclude(request, obj) or ()), *(f.name for f in self._json_fields())]

    def get_readonly_fields(self, request, obj=None):
        return [
            *super().get_readonly_fields(request, obj),
            *(redacted_json_display(f) for f in self._json_fields()),
        ]


class ReadOnlyAdmin(RedactedJsonMixin, admin.ModelAdmin):
    """History is evidence: support staff may read it, never edit or delete it."""

    def response_action(self, request, queryset):
        # A selection edited into something that is not an id was a 500 in Django's pk__in filter: refused,
        # with nothing changed, as Django refuses an empty one.
        if any(
            id_or_none(value) is None
            for value in request.POST.getlist(helpers.ACTION_CHECKBOX_NAME)
        ):
            self.message_user(
                request,
                "The selection is not a list of rows of this list; nothing was changed.",
                messages.WARNING,
            )
            return HttpResponseRedirect(request.get_full_path())
        return super().response_action(request, queryset)

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(Workspace)
class WorkspaceAdmin(admin.ModelAdmin):
    list_display = ("id", "name", "on_call", "created_at")
    search_fields = ("name",)


class MembershipForm(forms.ModelForm):
    reason = forms.CharField(
        widget=forms.Textarea, help_text="Why the role is granted; kept in the audit trail."
    )

    class Meta:
        model = Membership
        fields = ("user", "workspace", "role")


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    """Roles are granted (add) and revoked (delete) through the audited services, never edited in place."""

    form = MembershipForm
    list_display = ("user", "workspace", "role")
    list_filter = ("role", "workspace")
    search_fields = ("user__username",)

    def has_change_permission(self, request, obj=None):
        return False

    def save_model(self, request, obj, form, change):
        data = form.cleaned_data
        stored = membership_grant(
            workspace_id=data["workspace"].pk,
            user=data["user"],
            role=data["role"],
            actor=request.user,
            reason=data["reason"],
        )
        obj.pk = stored.pk

    def delete_model(self, request, obj):
        self._revoke(request, [obj])

    def delete_queryset(self, request, queryset):
        self._revoke(request, list(queryset))

    def _revoke(self, request, memberships: list[Membership]) -> None:
        for membership in memberships:
            try:
                membership_revoke(
                    workspace_id=membership.workspace_id,
                    user=membership.user,
                    role=membership.role,
                    actor=request.user,
                    reason=f"revoked in Django admin by {request.user}",
                )
            except ApprovalsError as exc:
                self.message_user(request, f"Not revoked: {exc}", messages.ERROR)


@admin.register(RoleChange)
class RoleChangeAdmin(ReadOnlyAdmin):
    list_display = ("changed_at", "workspace", "user", "action", "role", "changed_by", "reason")
    list_filter = ("action", "role", "workspace")
    search_fields = ("user__username", "changed_by__username")


@admin.register(SignOnIdentity)
class SignOnIdentityAdmin(ReadOnlyAdmin):
    """Read-only: a binding is made or removed by `manage.py sign_on_identities`, audited."""

    list_display = ("user", "issuer", "subject", "created_at", "last_sign_in_at")
    search_fields = ("user__username", "=subject")


@admin.register(SignOnIdentityEvent)
class SignOnIdentityEventAdmin(ReadOnlyAdmin):
    list_display = ("at", "action", "user", "issuer", "subject", "actor", "reason")
    list_filter = ("action",)
    search_fields = ("user__username", "=subject")


@admin.register(Request)
class RequestAdmin(ReadOnlyAdmin):
    list_display = (
        "workflow",
        "workspace",
        "number",
        "revision",
        "state",
        "requested_by",
        "created_at",
    )
    list_filter = ("state", "workspace", "workflow")
    search_fields = ("search_text",)  # read by `get_search_results`, the console's request search
    search_help_text = (
        "A request number (42, #42, request 42), a whole key or payload hash, or part of a client's name, "
        "an e-mail or a field the workflow marks searchable."
    )
    show_full_result_count = False  # no COUNT(*) over every request on every page
    actions = (erase_subject_action,)

    def get_search_results(self, request, queryset, search_term):
        # The console's one request search (its syntax, the trigram index), within the rows this admin shows.
        return requests_matching(queryset, search_term), False

    def changelist_view(self, request, extra_context=None):
        try:
            return super().changelist_view(request, extra_context)
        except BadSearch as exc:
            return HttpResponseBadRequest(
                f"Bad search: {exc}.", content_type="text/plain; charset=utf-8"
            )

    def has_erase_permission(self, request) -> bool:
        return may_erase(request.user)


@admin.register(RequestEvent)
class RequestEventAdmin(ReadOnlyAdmin):
    list_display = ("request", "from_state", "to_state", "actor", "at")
    list_filter = ("to_state",)


@admin.register(Approval)
class ApprovalAdmin(ReadOnlyAdmin):
    list_display = ("request", "decision", "decided_by", "rule_version", "decided_at")
    list_filter = ("decision", "rule_version", "request__workspace")
    search_fields = ("=request__number", "payload_hash")


# --- Intake: triggers, rule versions, delivery modes -------------------------------------------


@admin.register(TriggerRecord)
class TriggerRecordAdmin(ReadOnlyAdmin):
    list_display = (
        "received_at",
        "webhook_id",
        "reference",
        "sender_revision",
        "workspace_ref",
        "outcome",
        "status_code",
        "request",
    )
    list_filter = ("outcome", "workflow")
    search_fields = ("reference", "=webhook_id")
    raw_id_fields = ("request", "duplicate_of")


@admin.register(RequestReference)
class RequestReferenceAdmin(ReadOnlyAdmin):
    list_display = ("reference", "workspace", "workflow", "number", "latest_revision", "created_at")
    search_fields = ("reference",)


@admin.register(RuleVersion)
class RuleVersionAdmin(ReadOnlyAdmin):
    """Rules and their routed steps are published from a file, `manage.py workflows apply FILE`, never
    here: a form without the steps dropped a workflow's steps when it published (docs/intake.md)."""

    list_display = ("version", "workflow", "number", "step_routes", "created_by", "created_at")
    list_filter = ("workflow",)

    def changelist_view(self, request, extra_context=None):
        messages.info(
            request,
            "Rules are published with `manage.py workflows apply FILE` (a workflows file under version "
            "control: schema, steps and each step's destination); this page only shows them.",
        )
        return super().changelist_view(request, extra_context)

    @admin.display(description="steps")
    def step_routes(self, obj) -> str:
        return (
            ", ".join(f"{s['name']} → {s.get('destination') or 'default'}" for s in obj.steps)
            or "-"
        )


class WorkflowModeForm(forms.ModelForm):
    reason = forms.CharField(
        widget=forms.Textarea, help_text="Why the mode changes; kept in the audit trail."
    )
    confirmation = forms.CharField(
        required=False,
        help_text="To switch to live: the workflow's owner types its name (as on its go-live page).",
    )
    actor = None  # the person saving, set by WorkflowModeAdmin.get_form
    going_live = False  # set by `clean` once the owner's confirmation is checked

    class Meta:
        model = WorkflowMode
        fields = ("workflow", "mode", "allowed_workspaces")

    def clean(self):
        """Going live here asks what the go-live page asks: the owner, every disagreement explained, the
        workflow's name typed. Refused with the reason on the form, nothing written."""
        data = super().clean()
        workflow = self.instance.workflow if self.instance.pk else data.get("workflow")
        current = self.instance.mode if self.instance.pk else settings.WORKFLOW_DEFAULT_MODE
        if data.get("mode") != Mode.LIVE or current == Mode.LIVE or not workflow:
            return data
        refusal = go_live_refusal(
            workflow=workflow, actor=self.actor, results=workflow_agreement(workflow)
        )
        if refusal:
            raise forms.ValidationError({"mode": refusal})
        if data.get("confirmation", "").strip() != workflow:
            raise forms.ValidationError(
                {"confirmation": f"type the workflow's name, {workflow}, to confirm"}
            )
        self.going_live = True
        return data


@admin.register(WorkflowMode)
class WorkflowModeAdmin(admin.ModelAdmin):
    """Every save goes through `workflow_mode_set`, which writes the audit record."""

    form = WorkflowModeForm
    list_display = ("workflow", "mode", "updated_by", "updated_at")
    filter_horizontal = ("allowed_workspaces",)

    def get_readonly_fields(self, request, obj=None):
        return ("workflow",) if obj is not None else ()

    def get_form(self, request, obj=None, change=False, **kwargs):
        form = super().get_form(request, obj, change=change, **kwargs)
        return type(form.__name__, (form,), {"actor": request.user})

    def has_delete_permission(self, request, obj=None):
        return False

    def save_model(self, request, obj, form, change):
        data = form.cleaned_data
        if form.going_live:
            # The form checked the owner and the results; the service checks them again under its lock.
            stored = workflow_go_live(
                workflow=obj.workflow,
                actor=request.user,
                confirmation=data["confirmation"],
                reason=data["reason"],
            )
            obj.pk = stored.pk
            return
        stored = workflow_mode_set(
            workflow=obj.workflow,
            mode=data["mode"],
            actor=request.user,
            reason=data["reason"],
            allowed_workspace_ids=[w.pk for w in data["allowed_workspaces"]],
        )
        obj.pk = stored.pk

    def save_related(self, request, form, formsets, change):
        # The allow-list was stored by the service together with its audit record.
        pass


@admin.register(WorkflowModeChange)
class WorkflowModeChangeAdmin(ReadOnlyAdmin):
    list_display = (
        "changed_at",
        "workflow",
        "from_mode",
        "to_mode",
        "from_allowed",
        "to_allowed",
        "changed_by",
        "reason",
    )
    list_filter = ("workflow", "to_mode")


@admin.register(WorkspaceWorkflow)
class WorkspaceWorkflowAdmin(admin.ModelAdmin):
    list_display = ("workspace", "workflow", "accepts_triggers")
    list_filter = ("workflow", "accepts_triggers")


@admin.register(PilotBrief)
class PilotBriefAdmin(admin.ModelAdmin):
    """A workflow's business owner and exception path (docs/observation.md); saved by `pilot_brief_set`."""

    fields = ("workflow", "owner", "exception_path")
    list_display = ("workflow", "owner", "exception_path", "updated_by", "updated_at")

    def get_readonly_fields(self, request, obj=None):
        return ("workflow",) if obj is not None else ()

    def has_delete_permission(self, request, obj=None):
        return False

    def save_model(self, request, obj, form, change):
        data = form.cleaned_data
        stored = pilot_brief_set(
            workflow=obj.workflow,
            owner=data["owner"],
            exception_path=data["exception_path"],
            actor=request.user,
        )
        obj.pk = stored.pk


@admin.register(ObservedOutcome)
class ObservedOutcomeAdmin(ReadOnlyAdmin):
    list_display = (
        "recorded_at",
        "workspace",
        "action_key",
        "rule_version",
        "task_created",
        "agrees",
        "recorded_by",
        "explained_at",
    )
    list_filter = ("rule_version", "agrees", "current")


# Accounts: signed-in sessions, initial passwords and second factors (approvals/admin_accounts.py).
from approvals import admin_accounts  # noqa: E402,F401
