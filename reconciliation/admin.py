from django.contrib import admin

from approvals.admin import ReadOnlyAdmin
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
