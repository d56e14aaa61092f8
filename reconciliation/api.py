"""The signed status-event endpoint: POST /reconciliation/api/destinations/<name>/status-events.

A destination's receiver tells us a task's work moved or the task was deleted (docs/reconciliation.md,
"Status events"). Read as every signed API here: the body checks that need no secret first (so an unreadable
body is never a 401), then the Standard Webhooks signature, then strict JSON, then the event's fields.
"""

from django.conf import settings
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from httpapi.body import BodyRejected, read_json_body
from httpapi.signatures import SignatureInvalid, verify_signature
from httpapi.strict_json import JSONRejected, parse_json_object
from outbox.destinations.registry import enabled_destination_names
from outbox.services.call_limits import calls_limited
from outbox.services.status_events import StatusEventForged
from reconciliation.services.status_event_secrets import (
    note_if_signed_with_single_secret,
    status_event_secrets_of,
)
from reconciliation.services.status_events import StatusEventInvalid, status_event_receive

WEBHOOK_ID_MAX_LENGTH = 200


def _error(status: int, code: str, **extra) -> JsonResponse:
    return JsonResponse({"error": code, **extra}, status=status)


def _verified(request: HttpRequest, body: str, name: str) -> str:
    """The webhook-id of an event signed with the named destination's own secret. Raises SignatureInvalid
    (an unknown or disabled destination has no secret: nothing tells it from a wrong signature)."""
    headers = {k.lower(): v for k, v in request.headers.items() if k.lower().startswith("webhook-")}
    secrets = status_event_secrets_of(name)
    if not secrets:
        note_if_signed_with_single_secret(name=name, body=body, headers=headers)
        raise SignatureInvalid("no status-event secret of this destination verifies the event")
    verify_signature(secrets=secrets, body=body, headers=headers)
    return headers["webhook-id"]


# Signed with a secret, not a session: there is no CSRF cookie to protect.
@csrf_exempt
@require_POST
@calls_limited("status events api", as_json=True)
def status_events(request: HttpRequest, name: str) -> JsonResponse:
    try:
        body = read_json_body(request, limit=settings.STATUS_EVENTS_MAX_BODY_BYTES)
        webhook_id = _verified(request, body, name)
        document = parse_json_object(body, max_depth=8)
    except BodyRejected as exc:
        return JsonResponse(exc.as_dict(), status=exc.status)
    except SignatureInvalid as exc:
        return _error(401, "signature_rejected", detail=exc.reason)
    except JSONRejected as exc:
        return _error(422 if exc.code == "json_too_deep" else 400, exc.code, detail=exc.detail)
    # After the signature: who may not send events learns nothing of the destinations' names.
    if name not in enabled_destination_names():
        return _error(404, "unknown_destination", detail="no enabled destination has this name")
    if len(webhook_id) > WEBHOOK_ID_MAX_LENGTH:
        return _error(400, "webhook_id_too_long", limit=WEBHOOK_ID_MAX_LENGTH)
    try:
        answer = status_event_receive(destination=name, webhook_id=webhook_id, document=document)
    except StatusEventInvalid as exc:
        return _error(422, "event_invalid", reasons=exc.reasons)
    except StatusEventForged as exc:
        return _error(422, "task_not_given", detail=str(exc))
    return JsonResponse(answer.as_dict(), status=200)
