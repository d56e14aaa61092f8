from django.contrib import admin

from approvals.admin import ReadOnlyAdmin
from incidents.causes import condition_words
from incidents.models import AlertChannel, EscalationPolicy, Incident
from incidents.selectors.incidents import sees_security_incidents


@admin.register(Incident)
class IncidentAdmin(ReadOnlyAdmin):
    list_display = ("pk", "title", "kind", "severity", "state", "member_count", "opened_at")
    list_filter = ("kind", "severity", "state")
    search_fields = ("cause", "title")
    readonly_fields = ("failure_in_words",)

    @admin.display(description="What failed")
    def failure_in_words(self, incident: Incident) -> str:
        """The failure class as the incident page and its notifications say it: a destination's pause in
        words ("token endpoint unavailable (the API was not called)"), not its code (`token_endpoint`)."""
        return condition_words(incident.failure_class)

    def get_queryset(self, request):
        """Security incidents (of no workspace) only for holders of the named permission, as on the
        console's screens; viewing incidents in admin is not enough."""
        rows = super().get_queryset(request)
        if sees_security_incidents(request.user):
            return rows
        return rows.exclude(workspace_id__isnull=True)


# Where incidents page and how they escalate (docs/incidents.md). A channel names the environment variable
# of its secret; the secret itself is never stored.
@admin.register(AlertChannel)
class AlertChannelAdmin(admin.ModelAdmin):
    list_display = ("name", "kind", "workspace_id", "severity", "level", "enabled", "secret_env")
    list_filter = ("kind", "severity", "enabled")


@admin.register(EscalationPolicy)
class EscalationPolicyAdmin(admin.ModelAdmin):
    list_display = ("workspace_id", "ack_timeout_seconds", "max_pages")
