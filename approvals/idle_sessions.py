"""Idle timeout and absolute lifetime of console and admin sessions.

A session not used for `SESSION_IDLE_SECONDS` is ended on its next request, which is sent to sign in
again. The time of last use is written at most once per `SESSION_ACTIVITY_RESOLUTION_SECONDS`, so a
busy session does not cost a database write on every request (SESSION_SAVE_EVERY_REQUEST would).

A session also ends `SESSION_COOKIE_AGE` (SESSION_MAX_HOURS) after its sign-in, however busy: each write
of the activity time saves the session, and a save would move Django's relative expiry that far ahead
again, so the sign-in pins the expiry to a date and the time of sign-in is kept to end the session here.
Every time is read from this process's clock, the only clock the comparisons use.
"""

import datetime
import time

from django.conf import settings
from django.contrib.auth import logout
from django.contrib.auth.signals import user_logged_in
from django.contrib.auth.views import redirect_to_login
from django.dispatch import receiver

LAST_ACTIVITY = "_last_activity"
SIGNED_IN_AT = "_signed_in_at"


def _start_lifetime(session, now: int) -> None:
    session[SIGNED_IN_AT] = now
    ends = now + settings.SESSION_COOKIE_AGE
    session.set_expiry(datetime.datetime.fromtimestamp(ends, tz=datetime.UTC))


@receiver(user_logged_in, dispatch_uid="idle_sessions_start")
def _start_clock(sender, request, user, **kwargs) -> None:
    if request is not None and hasattr(request, "session"):
        now = int(time.time())
        request.session[LAST_ACTIVITY] = now
        _start_lifetime(request.session, now)


def _session_over(session, now: int) -> bool:
    last = session.get(LAST_ACTIVITY)
    signed_in = session.get(SIGNED_IN_AT)
    idle = isinstance(last, int) and now - last > settings.SESSION_IDLE_SECONDS
    too_old = isinstance(signed_in, int) and now - signed_in > settings.SESSION_COOKIE_AGE
    return idle or too_old


class IdleSessionTimeoutMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.user.is_authenticated:
            now = int(time.time())
            if _session_over(request.session, now):
                logout(request)
                return redirect_to_login(request.get_full_path())
            if not isinstance(request.session.get(SIGNED_IN_AT), int):
                # A session begun before the lifetime was pinned: its lifetime starts now.
                _start_lifetime(request.session, now)
            last = request.session.get(LAST_ACTIVITY)
            if (
                not isinstance(last, int)
                or now - last >= settings.SESSION_ACTIVITY_RESOLUTION_SECONDS
            ):
                request.session[LAST_ACTIVITY] = now
        return self.get_response(request)
