"""Django admin for support staff: outbox records are read-only; the safe actions (reconcile, assign)
go through the same services as the console and are written to the event history."""

from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.shortcuts import render
from django_q.models import Failure, OrmQ, Schedule, Success

from approvals.admin import ReadOnlyAdmin
from approvals.models import Request, TriggerRecord
from approvals.selectors import operators_of, user_by_id
from console.claims import record_words
from console.templatetags.evidence import state_badge
from incidents.models import Incident
from incidents.selectors.incidents import sees_security_incidents
from lib.search_syntax import BadSearch, request_number, search_typed
from outbox import services
from outbox.models import (
    AGE_CHOICES,
    HANDOFF_AGES,
    Attempt,
    DestinationConfig,
    Handoff,
    HandoffEvent,
)
from outbox.search_text import text_search
from reconciliation.models import Finding, ReconciliationRun


class AttemptInline(admin.TabularInline):
    model = Attempt
    template = "outbox/admin_attempts_inline.html"
    extra = 0
    can_delete = False
    readonly_fields = (
        "number",
        "worker",
        "started_at",
        "finished_at",
        "outcome",
        "failure_class",
        "reason_code",
        "status_code",
        "latency_ms",
        "detail",
    )

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


def _security_hidden(request) -> bool:
    """Whether the security incidents' notifications (`HandoffQuerySet.security_notifications`: their payload
    holds the incident's title and summary) are hidden from this user: shown only to holders of
    `incidents.view_security_incident`, as the incidents themselves (`incidents/admin.py`)."""
    return not sees_security_incidents(request.user)


class AgeFilter(admin.SimpleListFilter):
    title = "age"
    parameter_name = "age"

    def lookups(self, request, model_admin):
        return AGE_CHOICES

    def queryset(self, request, queryset):
        if self.value() in HANDOFF_AGES:
            return queryset.older_than(self.value())
        return queryset


class RetryingFilter(admin.SimpleListFilter):
    title = "retrying (in backoff)"
    parameter_name = "retrying"

    def lookups(self, request, model_admin):
        return [("yes", "waiting in backoff")]

    def queryset(self, request, queryset):
        if self.value() == "yes":
            return queryset.retrying()
        return queryset


@admin.register(Handoff)
class HandoffAdmin(ReadOnlyAdmin):
    list_display = (
        "action_key",
        "shown_state",
        "attempts",
        "failure_class",
        "reason_code",
        "destination_id",
        "workspace_id",
        "owner",
        "created_at",
    )
    list_filter = (
        "state",
        RetryingFilter,
        "failure_class",
        "workspace_id",
        "owner",
        AgeFilter,
        "workflow",
        "rule_version",
    )
    search_fields = ("search_text",)  # read by `get_search_results`, the console's search
    readonly_fields = ("shown_state",)

    def get_queryset(self, request):
        rows = super().get_queryset(request)
        if _security_hidden(request):
            rows = rows.exclude(pk__in=Handoff.objects.security_notifications().values("pk"))
        return rows

    @admin.display(description="state", ordering="state")
    def shown_state(self, obj: Handoff) -> str:
        """The state as every screen shows it, with its claim (`console/claims.py`): a delivered handoff
        whose task the receiver no longer has is not "Delivered" here either."""
        return state_badge(obj)

    def get_search_results(self, request, queryset, search_term):
        try:
            search_typed(search_term)
        except BadSearch as refused:
            # The console's limit and reason (`lib/search_syntax.py`): said above an empty list, not a 500.
            messages.error(request, f"Not searched: {refused}.")
            return queryset.none(), False
        # "request 42" (or "42") means that request, as in the console: Django's word-by-word search would
        # also match "42" inside task ids.
        number = request_number(search_term)
        if number is not None:
            return queryset.filter(source_ref__startswith=f"request {number} "), False
        if not search_term.strip():
            return queryset, False
        # The console's search: client name, e-mail, the workflow's searchable fields, key, request.
        return text_search(queryset, search_term), False

    show_full_result_count = False  # no COUNT(*) over the whole outbox on every page
    inlines = [AttemptInline]
    actions = ["reconcile", "assign"]

    # Support staff run these through their group's permissions (approvals.services.SUPPORT_ACTIONS);
    # admin offers an action only to users who hold its permission.
    def has_reconcile_permission(self, request) -> bool:
        return request.user.has_perm("outbox.reconcile_handoff")

    def has_assign_permission(self, request) -> bool:
        return request.user.has_perm("outbox.assign_handoff")

    @admin.action(
        description="Reconcile: ask the receiver about each key and settle (sends nothing)",
        permissions=["reconcile"],
    )
    def reconcile(self, request, queryset):
        outcomes: dict[str, int] = {}
        for pk in queryset.values_list("pk", flat=True):
            state = services.handoff_settle(handoff_id=pk, actor=request.user)
            outcomes[state] = outcomes.get(state, 0) + 1
        summary = ", ".join(
            f"{n} {state.replace('_', ' ')}" for state, n in sorted(outcomes.items())
        )
        self.message_user(
            request, f"Reconciled {sum(outcomes.values())} handoff(s); now: {summary}."
        )

    @admin.action(
        description="Assign to an operator of the handoff's workspace", permissions=["assign"]
    )
    def assign(self, request, queryset):
        if request.POST.get("apply"):
            raw = request.POST.get("owner", "")
            owner = user_by_id(raw)
            if raw and owner is None:
                # Only the empty choice means nobody: an owner that names no user is refused, not an unassign.
                self.message_user(
                    request, "No such operator: nothing was assigned.", messages.ERROR
                )
                return None
            reason = request.POST.get("reason", "").strip()
            ids = list(queryset.values_list("pk", flat=True))
            result = services.handoffs_bulk_apply(
                action="assign", handoff_ids=ids, actor=request.user, owner=owner, reason=reason
            )
            name = owner.get_username() if owner else "nobody"
            skipped = sum(result.skipped.values())
            self.message_user(
                request,
                f"Assigned {result.done} handoff(s) to {name}."
                + (f" Skipped {skipped}: {name} is not an operator there." if skipped else ""),
                messages.WARNING if skipped else messages.SUCCESS,
            )
            return None
        workspaces = sorted(set(queryset.values_list("workspace_id", flat=True)))
        return render(
            request,
            "outbox/admin_assign.html",
            {
                **self.admin_site.each_context(request),
                "title": "Assign handoffs",
                "opts": self.model._meta,
                "handoffs": queryset,
                "operators": operators_of(workspaces),
                "action_checkbox_name": ACTION_CHECKBOX_NAME,
            },
        )


def _without_security_handoffs(request, rows):
    """Attempts or events, without those of the security notifications the user may not see."""
    if _security_hidden(request):
        rows = rows.exclude(handoff__in=Handoff.objects.security_notifications().values("pk"))
    return rows


@admin.register(Attempt)
class AttemptAdmin(ReadOnlyAdmin):
    list_display = (
        "handoff",
        "number",
        "outcome",
        "failure_class",
        "status_code",
        "worker",
        "started_at",
    )
    list_filter = ("outcome", "failure_class")
    search_fields = ("handoff__action_key", "handoff__source_ref")

    def get_queryset(self, request):
        return _without_security_handoffs(request, super().get_queryset(request))


class EventActionFilter(admin.SimpleListFilter):
    """The operator action of an event. Django's own filter lists the blank action (a change the dispatcher
    made) as a link without text, which a screen reader cannot name: here it has one."""

    title = "action"
    parameter_name = "action"
    NONE = "none"

    def lookups(self, request, model_admin):
        actions = (
            model_admin.get_queryset(request)
            .order_by("action")
            .values_list("action", flat=True)
            .distinct()
        )
        return [(a or self.NONE, a or "none (the dispatcher's own change)") for a in actions]

    def queryset(self, request, queryset):
        if self.value() is None:
            return queryset
        return queryset.filter(action="" if self.value() == self.NONE else self.value())


@admin.register(HandoffEvent)
class HandoffEventAdmin(ReadOnlyAdmin):
    list_display = ("handoff", "from_state", "to_state", "actor_label", "action", "at")
    list_filter = ("to_state", EventActionFilter)
    search_fields = ("handoff__action_key", "handoff__source_ref")

    def get_queryset(self, request):
        return _without_security_handoffs(request, super().get_queryset(request))


@admin.register(DestinationConfig)
class DestinationConfigAdmin(ReadOnlyAdmin):
    # Changed by `manage.py destinations apply FILE` only (audited); the configuration names where each
    # secret comes from and holds none.
    list_display = ("name", "kind", "enabled", "updated_at")
    list_filter = ("kind", "enabled")
    search_fields = ("name",)


# --- Claims on the admin pages of other apps' records -------------------------------------------
# The facts support's admin states about requests, triggers, runs, findings, incidents and destinations
# carry their claims (`console/claims.py`), as the console's screens do; the admins are defined by their
# apps, below the console, so the claimed columns are put in here, in place of the plain ones.


def _claimed_column(field: str):
    @admin.display(description=field.replace("_", " "), ordering=field)
    def column(self, obj) -> str:
        return record_words(obj, field)

    column.__name__ = f"claimed_{field}"
    return column


def _with_claims(model, fields: tuple[str, ...]) -> None:
    registered = admin.site._registry[model]
    columns = {f"claimed_{field}": _claimed_column(field) for field in fields}
    shown = tuple(f"claimed_{f}" if f in fields else f for f in registered.list_display)
    _reregister(
        model,
        "Claimed",
        attrs={
            **columns,
            "list_display": shown,
            "readonly_fields": (*registered.readonly_fields, *columns),
        },
    )


def _reregister(model, prefix: str, *, mixins: tuple = (), attrs: dict | None = None) -> None:
    """The model's admin, as its app registered it (its app loads first), replaced by a subclass."""
    registered = type(admin.site._registry[model])
    admin.site.unregister(model)
    admin.site.register(
        model, type(f"{prefix}{registered.__name__}", (*mixins, registered), attrs or {})
    )


_with_claims(Request, ("state", "revision"))
_with_claims(TriggerRecord, ("outcome",))
_with_claims(DestinationConfig, ("enabled",))
_with_claims(ReconciliationRun, ("status", "keys_compared", "new_findings", "resolved_findings"))
_with_claims(Finding, ("status",))
_with_claims(Incident, ("state", "member_count"))


# --- django-q2 ------------------------------------------------------------------------------
# A schedule names any importable function and the next `qcluster` runs it: whoever can add one runs
# code on the workers. Its admin, and that of tasks and the queue, is for superusers only, whatever
# permissions a group holds.


class SuperuserOnly:
    def has_module_permission(self, request) -> bool:
        return request.user.is_active and request.user.is_superuser

    def has_view_permission(self, request, obj=None) -> bool:
        return request.user.is_active and request.user.is_superuser

    def has_add_permission(self, request, *args) -> bool:
        return request.user.is_active and request.user.is_superuser

    def has_change_permission(self, request, obj=None) -> bool:
        return request.user.is_active and request.user.is_superuser

    def has_delete_permission(self, request, obj=None) -> bool:
        return request.user.is_active and request.user.is_superuser


def _superuser_only(model) -> None:
    _reregister(model, "SuperuserOnly", mixins=(SuperuserOnly,))


for _model in (Schedule, Success, Failure, OrmQ):
    _superuser_only(_model)
