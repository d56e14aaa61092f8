"""The signed trigger endpoint: POST /approvals/api/triggers. Contract in docs/intake.md."""

import json

from django.conf import settings
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from approvals import intake


def _no_constants(name: str):
    raise ValueError(f"{name} is not JSON")


def _error(status: int, code: str, **extra) -> JsonResponse:
    return JsonResponse({"error": code, **extra}, status=status)


def _read_body(request: HttpRequest) -> bytes | None:
    """The body, or None when it is over the configured limit (read no more than limit + 1 bytes)."""
    limit = settings.INTAKE_MAX_BODY_BYTES
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared = 0
    if declared > limit:
        return None
    body = request.read(limit + 1)
    return None if len(body) > limit else body


# Signed with a secret, not a session: there is no CSRF cookie to protect.
@csrf_exempt
@require_POST
def triggers(request: HttpRequest) -> JsonResponse:
    body = _read_body(request)
    if body is None:
        return _error(413, "body_too_large", limit=settings.INTAKE_MAX_BODY_BYTES)
    headers = {k: v for k, v in request.headers.items() if k.lower().startswith("webhook-")}
    try:
        message = intake.trigger_signature_verify(body=body, headers=headers)
    except intake.TriggerSignatureRejected as exc:
        return _error(401, "signature_rejected", detail=exc.reason)
    if len(message.webhook_id) > intake.WEBHOOK_ID_MAX_LENGTH:
        return _error(400, "webhook_id_too_long", limit=intake.WEBHOOK_ID_MAX_LENGTH)
    try:
        document = json.loads(body, parse_constant=_no_constants)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return _error(400, "malformed_json")
    if not isinstance(document, dict):
        return _error(400, "malformed_json", detail="the body must be a JSON object")
    try:
        answer = intake.trigger_receive(message=message, document=document)
    except intake.TriggerReplayed as exc:
        return _error(401, "signature_rejected", detail=exc.reason)
    return JsonResponse(answer.body, status=answer.status_code)
