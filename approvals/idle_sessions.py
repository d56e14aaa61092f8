"""Idle timeout of console and admin sessions.

A session not used for `SESSION_IDLE_SECONDS` is ended on its next request, which is sent to sign in
again. The time of last use is written at most once per `SESSION_ACTIVITY_RESOLUTION_SECONDS`, so a
busy session does not cost a database write on every request (SESSION_SAVE_EVERY_REQUEST would).
Both times are read from this process's clock, the only clock the comparison uses.
"""

import time

from django.conf import settings
from django.contrib.auth import logout
from django.contrib.auth.signals import user_logged_in
from django.contrib.auth.views import redirect_to_login
from django.dispatch import receiver

LAST_ACTIVITY = "_last_activity"


@receiver(user_logged_in, dispatch_uid="idle_sessions_start")
def _start_clock(sender, request, user, **kwargs) -> None:
    if request is not None and hasattr(request, "session"):
        request.session[LAST_ACTIVITY] = int(time.time())


class IdleSessionTimeoutMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.user.is_authenticated:
            now = int(time.time())
            last = request.session.get(LAST_ACTIVITY)
            if isinstance(last, int) and now - last > settings.SESSION_IDLE_SECONDS:
                logout(request)
                return redirect_to_login(request.get_full_path())
            if (
                not isinstance(last, int)
                or now - last >= settings.SESSION_ACTIVITY_RESOLUTION_SECONDS
            ):
                request.session[LAST_ACTIVITY] = now
        return self.get_response(request)
