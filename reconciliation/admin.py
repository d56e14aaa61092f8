from django.contrib import admin

from approvals.admin import ReadOnlyAdmin
from incidents.models import AlertChannel, EscalationPolicy, Incident
from reconciliation.models import Finding, FindingEvent, ReconciliationRun


@admin.register(ReconciliationRun)
class ReconciliationRunAdmin(ReadOnlyAdmin):
    list_display = (
        "pk",
        "trigger",
        "status",
        "started_at",
        "finished_at",
        "keys_compared",
        "new_findings",
        "resolved_findings",
        "outcome_validation_failures",
    )
    list_filter = ("status", "trigger")


class FindingEventInline(admin.TabularInline):
    model = FindingEvent
    extra = 0
    can_delete = False
    readonly_fields = ("action", "from_status", "to_status", "actor_label", "note", "at")

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Finding)
class FindingAdmin(ReadOnlyAdmin):
    list_display = (
        "action_key",
        "kind",
        "status",
        "workspace_id",
        "outcome_validation",
        "first_seen_at",
        "last_seen_at",
    )
    list_filter = ("kind", "status", "outcome_validation", "workflow")
    search_fields = ("action_key",)
    inlines = [FindingEventInline]


@admin.register(Incident)
class IncidentAdmin(ReadOnlyAdmin):
    list_display = ("pk", "title", "kind", "severity", "state", "member_count", "opened_at")
    list_filter = ("kind", "severity", "state")
    search_fields = ("cause", "title")


# Where incidents page and how they escalate (docs/incidents.md). A channel names the environment variable
# of its secret; the secret itself is never stored.
@admin.register(AlertChannel)
class AlertChannelAdmin(admin.ModelAdmin):
    list_display = ("name", "kind", "workspace_id", "severity", "level", "enabled", "secret_env")
    list_filter = ("kind", "severity", "enabled")


@admin.register(EscalationPolicy)
class EscalationPolicyAdmin(admin.ModelAdmin):
    list_display = ("workspace_id", "ack_timeout_seconds", "max_pages")
