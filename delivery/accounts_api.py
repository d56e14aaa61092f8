"""The bundled accounts service's JSON API, on the IETF Idempotency-Key draft, with a bearer token.

    POST /delivery/accounts/v1/accounts       Idempotency-Key: <key>, Authorization: Bearer <token>
        201 {"account": {...}}                 created
        200 {"account": {...}}                 the same key and body again (header Idempotent-Replayed)
        400 {"error": {"code": "idempotency_key_missing"}}
        401 {"error": {"code": "unauthorized"}}
        409 {"error": {"code": "request_in_progress"}}      retry later with the same key
        422 {"error": {"code": "idempotency_key_reused"}}   another body under this key
    GET  /delivery/accounts/v1/accounts?idempotency_key=<key>
        200 {"accounts": [{...}]}              the account of the key, or an empty list
    GET  /delivery/accounts/v1/accounts/<id>
        200 {"account": {..., "status": "pending" | "active"}}   pending while it is set up
        404 {"error": {"code": "not_found"}}
    DELETE /delivery/accounts/v1/accounts/<id>
        200 {"account": {...}, "deleted": true}   closed now
        404 {"error": {"code": "not_found"}}       no such account (never created, or closed already)

It is a second receiving system for the demo and the tests (another contract than `delivery/api.py`'s
signed tasks) and knows nothing of the application that calls it.
"""

import hmac

from django.conf import settings
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods

from delivery import accounts
from httpapi.body import BodyRejected, read_json_body
from httpapi.strict_json import JSONRejected, parse_json_object


def _error(status: int, code: str, message: str) -> JsonResponse:
    return JsonResponse({"error": {"code": code, "message": message}}, status=status)


def _authorized(request: HttpRequest) -> bool:
    """A bearer token equal to the current or the previous one (a rotation's overlap)."""
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    accepted = [t for t in (settings.ACCOUNTS_API_TOKEN, settings.ACCOUNTS_API_TOKEN_PREVIOUS) if t]
    return scheme.lower() == "bearer" and any(
        hmac.compare_digest(token.encode(), t.encode()) for t in accepted
    )


def _create(request: HttpRequest) -> JsonResponse:
    try:
        text = read_json_body(request, limit=settings.RECEIVER_MAX_BODY_BYTES)
        payload = parse_json_object(text, max_depth=settings.RECEIVER_MAX_JSON_DEPTH)
    except BodyRejected as exc:
        return _error(exc.status, exc.code, exc.detail)
    except JSONRejected as exc:
        return _error(400, exc.code, exc.detail)
    try:
        answer = accounts.account_create_idempotent(
            key=request.headers.get("Idempotency-Key"), payload=payload
        )
    except accounts.KeyMissing as exc:
        return _error(400, "idempotency_key_missing", str(exc))
    except accounts.KeyInProgress as exc:
        return _error(409, "request_in_progress", str(exc))
    except accounts.KeyReused as exc:
        return _error(422, "idempotency_key_reused", str(exc))
    response = JsonResponse(
        {"account": accounts.account_as_json(answer.account)},
        status=201 if answer.created else 200,
    )
    if not answer.created:
        response["Idempotent-Replayed"] = "true"
    return response


def _lookup(request: HttpRequest) -> JsonResponse:
    key = request.GET.get("idempotency_key", "")
    if not key:
        return _error(400, "idempotency_key_missing", "ask with ?idempotency_key=<key>")
    account = accounts.account_for_key(key)
    return JsonResponse({"accounts": [accounts.account_as_json(account)] if account else []})


@csrf_exempt
@require_http_methods(["GET", "POST"])
def account_collection(request: HttpRequest) -> JsonResponse:
    if not _authorized(request):
        return _error(401, "unauthorized", "a valid bearer token is required")
    return _create(request) if request.method == "POST" else _lookup(request)


@csrf_exempt
@require_http_methods(["GET", "DELETE"])
def account_item(request: HttpRequest, account_id: str) -> JsonResponse:
    if not _authorized(request):
        return _error(401, "unauthorized", "a valid bearer token is required")
    if request.method == "GET":
        account = accounts.account_by_id(account_id)
        if account is None:
            return _error(404, "not_found", f"no account {account_id}")
        return JsonResponse({"account": accounts.account_as_json(account)})
    account = accounts.account_close(account_id=account_id)
    if account is None:
        return _error(404, "not_found", f"no account {account_id}")
    return JsonResponse({"account": accounts.account_as_json(account), "deleted": True})
