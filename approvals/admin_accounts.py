"""Admin of accounts beyond Django's own (docs/security.md): every signed-in session, ended by an
administrator holding `approvals.end_sessions` (ASVS 7.4.5); a password set here marked as initial, to be
changed at first sign-in (6.4.1); a lost authenticator reset (6.3.3), with `otp_totp.delete_totpdevice`."""

from django.contrib import admin
from django.contrib.admin.utils import unquote
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin as DjangoUserAdmin
from django_otp.plugins.otp_totp.models import TOTPDevice

from approvals.admin import ReadOnlyAdmin
from approvals.auth.second_factor import second_factor_reset
from approvals.models import SignedInSession
from approvals.services.initial_passwords import initial_password_set
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


# django-otp's own admin of devices shows their keys: a device is reset from its user instead.
if admin.site.is_registered(TOTPDevice):
    admin.site.unregister(TOTPDevice)

User = get_user_model()
admin.site.unregister(User)


@admin.register(User)
class AccountAdmin(DjangoUserAdmin):
    """Django's user admin; a password set here for someone else is an initial password (6.4.1)."""

    actions = ["reset_second_factor"]

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        if not change and obj.has_usable_password():
            initial_password_set(user=obj, set_by=request.user)

    def user_change_password(self, request, id, form_url=""):
        response = super().user_change_password(request, id, form_url)
        if request.method == "POST" and response.status_code == 302:
            user = self.get_object(request, unquote(id))
            if user is not None and user != request.user and user.has_usable_password():
                initial_password_set(user=user, set_by=request.user)
        return response

    def has_reset_second_factor_permission(self, request) -> bool:
        return request.user.has_perm("otp_totp.delete_totpdevice")

    @admin.action(
        description="Reset the second factor (they enrol a new authenticator at next sign-in)",
        permissions=["reset_second_factor"],
    )
    def reset_second_factor(self, request, queryset):
        users = list(queryset)
        removed = second_factor_reset(users=users, actor=request.user)
        self.message_user(request, f"Removed {removed} authenticator(s) of {len(users)} user(s).")
