"""The answer to a sign-in that django-axes refused (AXES_LOCKOUT_CALLABLE): 429, Retry-After, and words.

Two pauses, told apart: one user name locked at one address (`LOGIN_FAILURE_LIMIT`), or password sign-in
from a whole address paused because many user names failed from it (approvals.auth.lockout)."""

from django.conf import settings
from django.shortcuts import render


def sign_in_paused(request, original_response=None, credentials=None):
    pause = getattr(request, "sign_in_pause", None)
    if pause is not None:
        seconds = pause.retry_after_seconds(request.axes_attempt_time)
    else:
        # django-axes restarts the cool-off at every refused attempt, so it runs whole from now.
        seconds = int(settings.AXES_COOLOFF_TIME.total_seconds())
    context = {
        "spraying": pause is not None,
        "minutes": max(1, -(-seconds // 60)),
        "spray_window_minutes": int(settings.SIGN_IN_SPRAY_WINDOW.total_seconds() // 60),
        "sso_enabled": settings.OIDC_ENABLED,
        "sso_provider": settings.OIDC_PROVIDER_NAME,
    }
    response = render(request, settings.AXES_LOCKOUT_TEMPLATE, context, status=429)
    response["Retry-After"] = str(seconds)
    return response
