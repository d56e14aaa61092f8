from django.contrib import admin

from approvals.admin import ReadOnlyAdmin
from outbox.models import Attempt, Handoff, HandoffEvent


class AttemptInline(admin.TabularInline):
    model = Attempt
    extra = 0
    can_delete = False
    readonly_fields = ("number", "worker", "started_at", "finished_at", "outcome", "failure_class", "reason_code",
                       "status_code", "latency_ms", "detail")

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Handoff)
class HandoffAdmin(ReadOnlyAdmin):
    list_display = ("action_key", "state", "attempts", "failure_class", "reason_code", "destination_id",
                    "workspace_id", "owner", "created_at")
    list_filter = ("state", "failure_class", "workspace_id", "workflow", "rule_version")
    search_fields = ("action_key", "source_ref", "destination_id")
    inlines = [AttemptInline]


@admin.register(Attempt)
class AttemptAdmin(ReadOnlyAdmin):
    list_display = ("handoff", "number", "outcome", "failure_class", "status_code", "worker", "started_at")
    list_filter = ("outcome", "failure_class")
    search_fields = ("handoff__action_key",)


@admin.register(HandoffEvent)
class HandoffEventAdmin(ReadOnlyAdmin):
    list_display = ("handoff", "from_state", "to_state", "actor_label", "action", "at")
    list_filter = ("to_state", "action")
    search_fields = ("handoff__action_key",)
