"""The receiver's signed JSON API. It knows nothing of the application that calls it."""

import contextlib
import json
import socket
import time

from django.conf import settings
from django.db import transaction
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from delivery import faults, services
from delivery.errors import ActionKeyConflict, InvalidTaskPayload, TaskNotFound
from delivery.signing import SignatureRejected, verify_signed_request


def _error(status: int, code: str, **extra) -> JsonResponse:
    return JsonResponse({"error": code, **extra}, status=status)


def _read_body(request: HttpRequest) -> bytes | None:
    """The body, or None when it is over the configured limit (read no more than limit + 1 bytes)."""
    limit = settings.RECEIVER_MAX_BODY_BYTES
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared = 0
    if declared > limit:
        return None
    body = request.read(limit + 1)
    return None if len(body) > limit else body


def _authenticate(request: HttpRequest, body: bytes) -> JsonResponse | None:
    headers = {k.lower(): v for k, v in request.headers.items() if k.lower().startswith("webhook-")}
    try:
        verify_signed_request(body=body, headers=headers)
    except SignatureRejected as exc:
        return _error(401, "signature_rejected", detail=exc.reason)
    return None


def _drop_connection(request: HttpRequest, fault: faults.Fault) -> None:
    """Simulate a response lost after commit: close the socket, or wait past the client's timeout."""
    sock = request.META.get("gunicorn.socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        sock.close()
        return
    time.sleep(fault.slow_seconds)


def _outcome_answer(outcome: object) -> tuple[int, dict]:
    if isinstance(outcome, InvalidTaskPayload):
        return 422, {"error": "payload_invalid", "reasons": outcome.reasons}
    if isinstance(outcome, ActionKeyConflict):
        return 409, {"error": "action_key_conflict", "task_id": outcome.existing_task_id,
                     "action_key": outcome.action_key}
    return (201 if outcome.created else 200), services.task_as_receipt(outcome)


def _item_result(action_key: object, payload: object, fault: faults.Fault | None) -> tuple[int, dict]:
    """Status and body of a single create-by-key call."""
    if fault is not None and fault.before_commit:
        return int(fault.kind.removeprefix("http_")), {"error": "injected_fault", "kind": fault.kind}
    try:
        outcome = services.task_create_idempotent(action_key=action_key, payload=payload)
    except (InvalidTaskPayload, ActionKeyConflict) as exc:
        return _outcome_answer(exc)
    if fault is not None and fault.kind == "malformed":
        return 200, {"ok": True, "note": "injected malformed receipt"}
    return _outcome_answer(outcome)


def _signed_document(request: HttpRequest) -> dict | JsonResponse:
    """The verified JSON object of a signed POST, or the refusal to answer with."""
    body = _read_body(request)
    if body is None:
        return _error(413, "body_too_large", limit=settings.RECEIVER_MAX_BODY_BYTES)
    if (denied := _authenticate(request, body)) is not None:
        return denied
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return _error(400, "malformed_json")
    if not isinstance(document, dict):
        return _error(400, "malformed_json", detail="the body must be a JSON object")
    return document


def _after_commit_faults(request: HttpRequest, injected: list[faults.Fault]) -> None:
    for fault in injected:
        if fault.kind == "drop_after_commit":
            _drop_connection(request, fault)
            return
        if fault.kind == "slow":
            time.sleep(fault.slow_seconds)
            return


@csrf_exempt
@require_http_methods(["GET", "POST"])
def tasks(request: HttpRequest) -> JsonResponse:
    if request.method == "GET":
        return _task_keys(request)
    # The replay record and the task commit together: one commit per call.
    with transaction.atomic(using=services.DB):
        document = _signed_document(request)
        if isinstance(document, JsonResponse):
            return document
        action_key = document.get("action_key")
        idempotency_key = request.headers.get("Idempotency-Key")
        if idempotency_key is not None and idempotency_key != action_key:
            return _error(400, "idempotency_key_mismatch", detail="Idempotency-Key must equal action_key")
        fault = faults.fault_for(action_key)
        status, body = _item_result(action_key, document.get("payload"), fault)
    if fault is not None and status == 429:
        response = JsonResponse(body, status=status)
        response["Retry-After"] = str(fault.retry_after)
        return response
    _after_commit_faults(request, [fault] if fault else [])
    return JsonResponse(body, status=status)


@csrf_exempt
@require_POST
def tasks_batch(request: HttpRequest) -> JsonResponse:
    """Up to RECEIVER_BATCH_LIMIT items, each answered as the single call would answer it; one item's
    conflict or rejection does not fail the others. One commit for the whole batch."""
    injected: list[faults.Fault] = []
    with transaction.atomic(using=services.DB):
        document = _signed_document(request)
        if isinstance(document, JsonResponse):
            return document
        items = document.get("items")
        if not isinstance(items, list) or not items:
            return _error(400, "malformed_json", detail="items must be a non-empty list")
        if len(items) > settings.RECEIVER_BATCH_LIMIT:
            return _error(413, "too_many_items", limit=settings.RECEIVER_BATCH_LIMIT)
        results: list[dict | None] = [None] * len(items)
        creatable = []
        for index, item in enumerate(items):
            if not isinstance(item, dict):
                results[index] = {"http_status": 400, "error": "malformed_item"}
                continue
            fault = faults.fault_for(item.get("action_key"))
            if fault is not None:
                injected.append(fault)
                if fault.before_commit:
                    status, body = int(fault.kind.removeprefix("http_")), {"error": "injected_fault",
                                                                            "kind": fault.kind}
                    if status == 429:
                        body["retry_after"] = fault.retry_after
                    results[index] = {"http_status": status, **body}
                    continue
            creatable.append((index, item, fault))
        outcomes = services.task_create_many([(item.get("action_key"), item.get("payload"))
                                              for _index, item, _fault in creatable])
        for (index, _item, fault), outcome in zip(creatable, outcomes, strict=True):
            status, body = _outcome_answer(outcome)
            if fault is not None and fault.kind == "malformed" and status in (200, 201):
                status, body = 200, {"ok": True, "note": "injected malformed receipt"}
            results[index] = {"http_status": status, **body}
    _after_commit_faults(request, injected)
    return JsonResponse({"results": results})


def _task_keys(request: HttpRequest) -> JsonResponse:
    if (denied := _authenticate(request, b"")) is not None:
        return denied
    after = request.GET.get("after", "")
    try:
        limit = min(max(int(request.GET.get("limit", 500)), 1), 5000)
    except ValueError:
        return _error(400, "bad_limit")
    items = services.task_list_keys(after=after, limit=limit)
    next_after = items[-1]["action_key"] if len(items) == limit else None
    return JsonResponse({"items": items, "next_after": next_after})


@csrf_exempt
@require_GET
def task_detail(request: HttpRequest, action_key: str) -> JsonResponse:
    if (denied := _authenticate(request, b"")) is not None:
        return denied
    try:
        task = services.task_get(action_key=action_key)
    except TaskNotFound:
        return _error(404, "not_found", action_key=action_key)
    return JsonResponse(
        {
            "task_id": str(task.task_id),
            "action_key": task.action_key,
            "payload_hash": task.payload_hash,
            "status": task.status,
            "created_at": task.created_at.isoformat(),
        }
    )
