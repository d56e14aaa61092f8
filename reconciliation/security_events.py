"""Security events, recorded where they are refused so that a rate of them pages (docs/incidents.md).

The signed APIs (triggers at intake, the receiver's API, destinations' status events) answer a forged,
stale or replayed signature with 401 `signature_rejected` and write nothing; django-axes refuses a
locked-out sign-in. Neither told anyone. `SecurityEventMiddleware` records each refused signed call from
the answer it got (the views stay as they are: a refusal writes nothing of theirs), `record_lockout` each
refused sign-in, from django-axes' `user_locked_out` signal, and `record_spraying` one event per spraying
episode of an address (approvals.auth.lockout). The incidents' sweep pages when one kind passes a rate.
"""

import json
import logging

from django.conf import settings
from django.db import connections, transaction
from django.http import HttpRequest, HttpResponse

from lib.databases import DB
from outbox.clock import DbNow
from outbox.redaction import redact_text
from reconciliation.models import SecurityEvent, SecurityEventKind

log = logging.getLogger(__name__)
# The URL namespaces of the signed APIs, and the source each event is recorded under; a signed route that
# shares its namespace with screens is named by (namespace, url name).
SIGNED_APIS = {"intake": "intake", "delivery": "receiver"}
SIGNED_ROUTES = {("reconciliation", "status_events"): "status_events"}


def _signed_source(request: HttpRequest) -> str | None:
    match = getattr(request, "resolver_match", None)
    if match is None:
        return None
    return SIGNED_APIS.get(match.namespace) or SIGNED_ROUTES.get((match.namespace, match.url_name))


def security_event_record(*, kind: str, source: str, detail: str = "") -> None:
    SecurityEvent.objects.using(DB).create(
        kind=kind, source=source, detail=redact_text(detail)[:300]
    )


def _refusal_detail(response: HttpResponse) -> str | None:
    """The refusal's reason when the answer is a signature refusal, else None."""
    if response.status_code != 401 or response.get("Content-Type", "") != "application/json":
        return None
    try:
        document = json.loads(response.content)
    except ValueError:
        return None
    if not isinstance(document, dict) or document.get("error") != "signature_rejected":
        return None
    return str(document.get("detail", ""))


class SecurityEventMiddleware:
    """Records every refused signature of the signed APIs as a security event (a replay as its own kind)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        source = _signed_source(request)
        if source is None:
            return response
        detail = _refusal_detail(response)
        if detail is not None:
            kind = (
                SecurityEventKind.REPLAY
                if "replay" in detail
                else SecurityEventKind.SIGNATURE_REJECTED
            )
            try:
                security_event_record(kind=kind, source=source, detail=f"{request.path}: {detail}")
            except Exception:  # noqa: BLE001 - the refusal is answered even if it cannot be recorded
                log.exception("security event not recorded")
        return response


def record_lockout(sender, request=None, username=None, ip_address=None, **kwargs) -> None:
    """django-axes' user_locked_out: a sign-in refused because the account or address is locked out."""
    security_event_record(
        kind=SecurityEventKind.LOCKOUT,
        source="sign_in",
        detail=f"user {username or '(none)'} from {ip_address or 'unknown address'}",
    )


def _spraying_detail_prefix(ip_address: str) -> str:
    return f"address {ip_address}: "


def record_spraying(sender, ip_address: str, pause, **kwargs) -> None:
    """approvals.auth.lockout's password_spraying_paused: one event per address and spraying window.

    A pause that begins within a window of the address's last event continues its episode (the workers
    that saw the threshold crossed at once, an attacker going on at the paused rate): no second event."""
    prefix = _spraying_detail_prefix(ip_address)
    window_seconds = settings.SIGN_IN_SPRAY_WINDOW.total_seconds()
    with transaction.atomic(using=DB):
        if connections[DB].vendor == "postgresql":
            # Serializes the check and the insert across workers (SQLite's IMMEDIATE transactions do).
            with connections[DB].cursor() as cursor:
                cursor.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [prefix])
        episode_recorded = (
            SecurityEvent.objects.using(DB)
            .filter(
                kind=SecurityEventKind.PASSWORD_SPRAYING,
                detail__startswith=prefix,
                at__gte=DbNow(-window_seconds),
            )
            .exists()
        )
        if not episode_recorded:
            security_event_record(
                kind=SecurityEventKind.PASSWORD_SPRAYING,
                source="sign_in",
                detail=f"{prefix}{pause.user_names} user names failed within "
                f"{int(window_seconds // 60)} minutes; password sign-in from it paused until "
                f"{pause.until.isoformat(timespec='seconds')}",
            )
