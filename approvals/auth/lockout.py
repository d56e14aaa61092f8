"""Who a failed sign-in may hold back: django-axes' database handler, with two rules of ours.

- A failed provider callback names nobody (django-axes would count it against the address alone, so a few
  bogus codes locked everyone's single sign-on behind an office's NAT). It is logged in axes' failure log
  and never counted towards a lock: exchanging the code at the provider is what tells a colleague from an
  attacker, so no callback is refused before it.
- Password spraying: when `SIGN_IN_SPRAY_USER_NAMES` different user names have failed from one address
  within `SIGN_IN_SPRAY_WINDOW`, password sign-in from that address pauses until fewer have (429 with
  Retry-After), and `password_spraying_paused` is sent (reconciliation records one security event an
  episode). Read from axes' AccessFailureLog, so every worker and process sees the same count.

django-axes' own lockout of one user name at one address is unchanged. docs/security.md says it all.
"""

import logging
import math
from dataclasses import dataclass
from datetime import datetime

from axes.handlers.database import AxesDatabaseHandler
from axes.helpers import get_client_username
from axes.models import AccessFailureLog
from django.conf import settings
from django.db.models import Max
from django.dispatch import Signal

log = logging.getLogger(__name__)

# Sent when a failed password sign-in starts a pause of its address; arguments: ip_address, pause.
password_spraying_paused = Signal()


@dataclass(frozen=True)
class SprayingPause:
    ip_address: str
    user_names: int
    until: datetime

    def retry_after_seconds(self, now: datetime) -> int:
        return max(1, math.ceil((self.until - now).total_seconds()))


def spraying_pause(*, ip_address: str, now: datetime) -> SprayingPause | None:
    """The pause of password sign-in from `ip_address` at `now`, or None while fewer names failed.

    The pause lasts until enough names' last failures leave the window to bring the count under the
    threshold; attempts refused during it are not logged, so it ends within one window."""
    window = settings.SIGN_IN_SPRAY_WINDOW
    threshold = settings.SIGN_IN_SPRAY_USER_NAMES
    last_failures = list(
        AccessFailureLog.objects.filter(
            ip_address=ip_address, attempt_time__gt=now - window, username__gt=""
        )
        .values("username")
        .annotate(last=Max("attempt_time"))
        .order_by("last")
        .values_list("last", flat=True)
    )
    if len(last_failures) < threshold:
        return None
    return SprayingPause(
        ip_address=ip_address,
        user_names=len(last_failures),
        until=last_failures[len(last_failures) - threshold] + window,
    )


# How a person signed in, by the backend that let them in (settings.AUTHENTICATION_BACKENDS).
SIGN_IN_METHODS = {"LocalPasswordBackend": "password", "OIDCRoleBackend": "single sign-on"}


def _names_a_user(request, credentials) -> bool:
    """A password attempt names a user; the provider's callback does not (its code names the person)."""
    return bool(get_client_username(request, credentials))


class SignInAttemptsHandler(AxesDatabaseHandler):
    """AXES_HANDLER: provider callbacks never locked, password sign-in paused for a spraying address."""

    def is_allowed(self, request, credentials=None) -> bool:
        if not _names_a_user(request, credentials):
            return True
        if not self.is_whitelisted(request, credentials):
            now = request.axes_attempt_time
            pause = spraying_pause(ip_address=request.axes_ip_address, now=now)
            if pause is not None:
                request.sign_in_pause = pause
                return False
        return super().is_allowed(request, credentials)

    def user_logged_in(self, sender, request, user, **kwargs):
        """django-axes masks the user name and address of its own line: ours says who, how and from where
        (the record's time says when)."""
        super().user_logged_in(sender, request, user, **kwargs)
        backend = getattr(user, "backend", "") or ""
        log.info(
            "sign-in of %s by %s from %s",
            user.get_username(),
            SIGN_IN_METHODS.get(backend.rsplit(".", 1)[-1], backend or "an unnamed backend"),
            getattr(request, "axes_ip_address", None),
        )

    def user_login_failed(self, sender, credentials: dict, request=None, **kwargs):
        if request is None:
            return super().user_login_failed(sender, credentials, request, **kwargs)
        if getattr(request, "sign_in_pause", None) is not None:
            # Refused unread and not logged: counting it would stretch the pause past its window.
            self._answer_paused(request, credentials)
            return None
        if not _names_a_user(request, credentials):
            self._log_callback_failure(request)
            return None
        super().user_login_failed(sender, credentials, request, **kwargs)
        if not self.is_whitelisted(request, credentials):
            self._pause_if_spraying(request, credentials)
        return None

    def _pause_if_spraying(self, request, credentials) -> None:
        """After a failure is logged: if its address now sprays, this answer is the pause's first."""
        pause = spraying_pause(ip_address=request.axes_ip_address, now=request.axes_attempt_time)
        if pause is None:
            return
        request.sign_in_pause = pause
        self._answer_paused(request, credentials)
        log.warning(
            "password sign-in from %s paused until %s: %d user names failed",
            pause.ip_address,
            pause.until.isoformat(timespec="seconds"),
            pause.user_names,
        )
        for _, error in password_spraying_paused.send_robust(
            sender=self.__class__, ip_address=pause.ip_address, pause=pause
        ):
            if error is not None:
                log.error("password spraying not recorded: %r", error)

    @staticmethod
    def _answer_paused(request, credentials) -> None:
        """AxesMiddleware answers a request marked so with AXES_LOCKOUT_CALLABLE (429)."""
        request.axes_locked_out = True
        request.axes_credentials = credentials

    def _log_callback_failure(self, request) -> None:
        log.warning("single sign-on callback failed from %s", request.axes_ip_address)
        if settings.AXES_ENABLE_ACCESS_FAILURE_LOG:
            AccessFailureLog.objects.create(
                username=None,
                ip_address=request.axes_ip_address,
                user_agent=request.axes_user_agent,
                http_accept=request.axes_http_accept,
                path_info=request.axes_path_info,
                attempt_time=request.axes_attempt_time,
                locked_out=False,
            )
            # django-axes keeps AXES_ACCESS_FAILURE_LOG_PER_USER_LIMIT rows per user name: "none" too.
            self.remove_out_of_limit_failure_logs(username=None)
