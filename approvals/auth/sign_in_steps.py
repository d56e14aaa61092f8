"""What a password sign-in still owes before its session may be used (docs/security.md "Second factor",
"Initial passwords"): first a second factor (approvals/auth/second_factor.py), then a password of the
person's own in place of one an administrator set (approvals/services/initial_passwords.py).

The password backend marks the request whose password it checked; the sign-in that follows marks the steps
owed in the session, and until they are done every page sends the browser to the step (only the step's pages and signing
out answer). Single sign-on owes neither: the provider authenticates (docs/sso.md).
"""

from django.contrib.auth.signals import user_logged_in
from django.dispatch import receiver
from django.http import HttpResponseRedirect
from django.urls import reverse

from approvals.auth.second_factor import second_factor_owed
from approvals.services.initial_passwords import initial_password_owed

# Set on the request by the password backend when it has just checked a password: the sign-in that follows
# owes these steps (a session opened any other way, by the provider or a test, owes none). Here, not in
# approvals/auth/backends.py: this module is imported by every process at start (its receiver), and importing
# the backends there brought in mozilla-django-oidc, jwt, cryptography and requests, about 0.04 s of CPU a
# process that never signs anyone in (a dispatcher, a `manage.py` command; docs/testing.md).
PASSWORD_CHECKED = "password_checked"  # noqa: S105 - an attribute's name
SECOND_FACTOR_OWED = "_second_factor_owed"
PASSWORD_CHANGE_OWED = "_password_change_owed"  # noqa: S105 - a session key's name
PASSWORD_BACKEND = "approvals.auth.backends.LocalPasswordBackend"  # noqa: S105 - a dotted path


@receiver(user_logged_in, dispatch_uid="sign_in_steps_owed")
def _mark_steps_owed(sender, request, user, **kwargs) -> None:
    if request is None or not hasattr(request, "session"):
        return
    if not getattr(request, PASSWORD_CHECKED, False):
        return
    if second_factor_owed(user):
        request.session[SECOND_FACTOR_OWED] = True
    if initial_password_owed(user):
        request.session[PASSWORD_CHANGE_OWED] = True


def second_factor_done(request) -> None:
    """The second factor is given: a new session key for the stronger session (7.2.4)."""
    request.session.pop(SECOND_FACTOR_OWED, None)
    request.session.cycle_key()


def password_change_done(request) -> None:
    request.session.pop(PASSWORD_CHANGE_OWED, None)


def step_owed(request) -> str | None:
    """The URL name of the step this session still owes, if any."""
    if request.session.get(SECOND_FACTOR_OWED):
        return "second_factor"
    if request.session.get(PASSWORD_CHANGE_OWED):
        return "password_change"
    return None


class SignInStepsMiddleware:
    """Every page but the owed step's (and signing out) sends the browser to that step."""

    STEP_PATHS = {
        "second_factor": ("second_factor", "second_factor_enrol", "logout"),
        "password_change": ("password_change", "logout"),
    }

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated:
            step = step_owed(request)
            if step is not None:
                allowed = {reverse(name) for name in self.STEP_PATHS[step]}
                if request.path not in allowed:
                    return HttpResponseRedirect(reverse(step))
        return self.get_response(request)
