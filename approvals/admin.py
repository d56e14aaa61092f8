from django.contrib import admin

from approvals.models import Approval, Membership, Request, RequestEvent, Workspace


class ReadOnlyAdmin(admin.ModelAdmin):
    """History is evidence: support staff may read it, never edit or delete it."""

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


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ("user", "workspace", "role")
    list_filter = ("role", "workspace")
    search_fields = ("user__username",)


@admin.register(Request)
class RequestAdmin(ReadOnlyAdmin):
    list_display = ("workflow", "workspace", "number", "revision", "state", "requested_by", "created_at")
    list_filter = ("state", "workspace", "workflow")
    search_fields = ("=number", "payload_hash")


@admin.register(RequestEvent)
class RequestEventAdmin(ReadOnlyAdmin):
    list_display = ("request", "from_state", "to_state", "actor", "at")
    list_filter = ("to_state",)


@admin.register(Approval)
class ApprovalAdmin(ReadOnlyAdmin):
    list_display = ("request", "decision", "decided_by", "rule_version", "decided_at")
    list_filter = ("decision", "rule_version", "request__workspace")
    search_fields = ("=request__number", "payload_hash")
