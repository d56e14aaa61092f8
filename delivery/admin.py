from django.contrib import admin

from delivery.models import ReceiverTask, SeenMessage


@admin.register(ReceiverTask)
class ReceiverTaskAdmin(admin.ModelAdmin):
    """The receiver's own records, in its own database (the router sends every query there)."""

    list_display = ("action_key", "task_id", "status", "created_at")
    list_filter = ("status",)
    search_fields = ("action_key", "=task_id")
    readonly_fields = ("task_id", "action_key", "payload", "payload_hash", "created_at")

    def has_add_permission(self, request):
        return False


@admin.register(SeenMessage)
class SeenMessageAdmin(admin.ModelAdmin):
    list_display = ("message_id", "received_at")
    search_fields = ("message_id",)

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
