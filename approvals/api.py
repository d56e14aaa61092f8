"""The signed trigger endpoint: POST /approvals/api/triggers. Contract in docs/intake.md."""

from django.conf import settings
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from approvals import intake
from httpapi.body import BodyRejected, read_json_body
from httpapi.strict_json import JSONRejected, parse_json_object
from outbox.services.call_limits import calls_limited


def _error(status: int, code: str, **extra) -> JsonResponse:
    return JsonResponse({"error": code, **extra}, status=status)


def _refusal(exc: Exception) -> JsonResponse:
    if isinstance(exc, BodyRejected):
        return JsonResponse(exc.as_dict(), status=exc.status)
    if isinstance(exc, intake.TriggerSignatureRejected):
        return _error(401, "signature_rejected", detail=exc.reason)
    # Well-formed JSON nested past the limit is unprocessable; anything else is not JSON we accept.
    return _error(422 if exc.code == "json_too_deep" else 400, exc.code, detail=exc.detail)


def _signed_trigger(request: HttpRequest) -> tuple[intake.SignedMessage, dict]:
    """The verified message and its JSON object. Raises BodyRejected, TriggerSignatureRejected or
    JSONRejected; the checks that need no secret come first, so an unreadable body is never a 401."""
    text = read_json_body(request, limit=settings.INTAKE_MAX_BODY_BYTES)
    headers = {k: v for k, v in request.headers.items() if k.lower().startswith("webhook-")}
    message = intake.trigger_signature_verify(body=text, headers=headers)
    if len(message.webhook_id) > intake.WEBHOOK_ID_MAX_LENGTH:
        raise BodyRejected(
            400,
            "webhook_id_too_long",
            f"at most {intake.WEBHOOK_ID_MAX_LENGTH} characters",
            intake.WEBHOOK_ID_MAX_LENGTH,
        )
    return message, parse_json_object(text, max_depth=settings.INTAKE_MAX_JSON_DEPTH)


# Signed with a secret, not a session: there is no CSRF cookie to protect.
@csrf_exempt
@require_POST
@calls_limited("trigger intake api", as_json=True)
def triggers(request: HttpRequest) -> JsonResponse:
    try:
        message, document = _signed_trigger(request)
    except (BodyRejected, intake.TriggerSignatureRejected, JSONRejected) as exc:
        return _refusal(exc)
    try:
        answer = intake.trigger_receive(message=message, document=document)
    except intake.TriggerReplayed as exc:
        return _refusal(exc)
    return JsonResponse(answer.body, status=answer.status_code)
