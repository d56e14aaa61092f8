from django.contrib import admin

from delivery.models import ReceiverTask, SeenMessage


@admin.register(ReceiverTask)
class ReceiverTaskAdmin(admin.ModelAdmin):
    """The receiver's own records, in its own database (the router sends every query there).

    Never changed or deleted here, not even by a superuser: "the same key returns the original task"
    must hold for every key. The payload is not shown (it may hold personal data, and the receiver has no
    redaction of its own); its hash identifies it."""

    list_display = ("action_key", "task_id", "status", "created_at")
    list_filter = ("status",)
    search_fields = ("action_key", "=task_id")
    exclude = ("payload",)
    readonly_fields = ("task_id", "action_key", "payload_hash", "status", "created_at")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(SeenMessage)
class SeenMessageAdmin(admin.ModelAdmin):
    """Replay records: read-only for everyone."""

    list_display = ("message_id", "received_at")
    search_fields = ("message_id",)

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        # Forgetting a seen message id would reopen the replay window for a captured request.
        return False
