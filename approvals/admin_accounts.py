"""Admin of accounts beyond Django's own: every signed-in session, ended by an administrator holding
`approvals.end_sessions` (ASVS 7.4.5, docs/security.md "Sessions of an account")."""

from django.contrib import admin

from approvals.admin import ReadOnlyAdmin
from approvals.models import SignedInSession
from approvals.services.sessions import sessions_end, sessions_end_of_users


@admin.register(SignedInSession)
class SignedInSessionAdmin(ReadOnlyAdmin):
    """Read-only rows; ending them is an action, for users with `approvals.end_sessions` (and the view
    permission to see the list). Select every row to end every session."""

    list_display = ("user", "signed_in_at", "method", "address", "user_agent")
    list_filter = ("method",)
    search_fields = ("user__username",)
    exclude = ("session_key",)  # a bearer credential: never shown
    actions = ["end_selected", "end_all_of_their_users"]

    def has_end_sessions_permission(self, request) -> bool:
        return request.user.has_perm("approvals.end_sessions")

    @admin.action(description="End the selected sessions", permissions=["end_sessions"])
    def end_selected(self, request, queryset):
        ended = sessions_end(sessions=queryset)
        self.message_user(request, f"Ended {ended} session(s): their browsers must sign in again.")

    @admin.action(
        description="End every session of the selected sessions' users",
        permissions=["end_sessions"],
    )
    def end_all_of_their_users(self, request, queryset):
        users = {row.user_id for row in queryset}
        ended = sessions_end_of_users(users=users)
        self.message_user(request, f"Ended {ended} session(s) of {len(users)} user(s).")
