"""The receiver's signed JSON API. It knows nothing of the application that calls it."""

from django.conf import settings
from django.db import transaction
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from delivery import services
from delivery.errors import ActionKeyConflict, InvalidTaskPayload, InvalidTaskStatus, TaskNotFound
from delivery.faults import Item, ItemAnswer, ItemsAnswerer, injects_faults, refuses_lookups
from delivery.outage import unavailable_during_outage
from delivery.signing import SignatureRejected, verify_signed_request
from httpapi.body import BodyRejected, read_json_body
from httpapi.strict_json import JSONRejected, parse_json_object


def _error(status: int, code: str, **extra) -> JsonResponse:
    return JsonResponse({"error": code, **extra}, status=status)


def _refusal(exc: Exception) -> JsonResponse:
    if isinstance(exc, BodyRejected):
        return JsonResponse(exc.as_dict(), status=exc.status)
    if isinstance(exc, SignatureRejected):
        return _error(401, "signature_rejected", detail=exc.reason)
    # Well-formed JSON nested past the limit is unprocessable; anything else is not JSON we accept.
    return _error(422 if exc.code == "json_too_deep" else 400, exc.code, detail=exc.detail)


_REFUSALS = (BodyRejected, SignatureRejected, JSONRejected)


def _authenticate(request: HttpRequest, body: str) -> None:
    headers = {k.lower(): v for k, v in request.headers.items() if k.lower().startswith("webhook-")}
    verify_signed_request(body=body, headers=headers)


def _signed_document(request: HttpRequest) -> dict:
    """The verified JSON object of a signed POST. Raises one of _REFUSALS.

    The checks that need no secret come first, so that a body the receiver cannot read is never
    answered 401, which the sender would take for a credential failure.
    """
    text = read_json_body(request, limit=settings.RECEIVER_MAX_BODY_BYTES)
    _authenticate(request, text)
    return parse_json_object(text, max_depth=settings.RECEIVER_MAX_JSON_DEPTH)


def _outcome_answer(outcome: object) -> ItemAnswer:
    if isinstance(outcome, InvalidTaskPayload):
        return 422, {"error": "payload_invalid", "reasons": outcome.reasons}
    if isinstance(outcome, ActionKeyConflict):
        return 409, {
            "error": "action_key_conflict",
            "task_id": outcome.existing_task_id,
            "action_key": outcome.action_key,
        }
    return (201 if outcome.created else 200), services.task_as_receipt(outcome)


def _answer_one(items: list[Item]) -> list[ItemAnswer]:
    [(action_key, payload)] = items
    try:
        outcome = services.task_create_idempotent(action_key=action_key, payload=payload)
    except (InvalidTaskPayload, ActionKeyConflict) as exc:
        return [_outcome_answer(exc)]
    return [_outcome_answer(outcome)]


def _answer_many(items: list[Item]) -> list[ItemAnswer]:
    return [_outcome_answer(outcome) for outcome in services.task_create_many(items)]


def _answerer(request: HttpRequest, answer: ItemsAnswerer) -> ItemsAnswerer:
    # A wrapper the view opted into (delivery.faults) may stand between the API and the store.
    wrap = getattr(request, "wrap_item_answers", None)
    return answer if wrap is None else wrap(answer)


@csrf_exempt
@require_http_methods(["GET", "POST"])
@unavailable_during_outage
@injects_faults
def tasks(request: HttpRequest) -> JsonResponse:
    if request.method == "GET":
        return _task_keys(request)
    # The replay record and the task commit together: one commit per call.
    with transaction.atomic(using=services.DB):
        try:
            document = _signed_document(request)
        except _REFUSALS as exc:
            return _refusal(exc)
        action_key = document.get("action_key")
        idempotency_key = request.headers.get("Idempotency-Key")
        if idempotency_key is not None and idempotency_key != action_key:
            return _error(
                400, "idempotency_key_mismatch", detail="Idempotency-Key must equal action_key"
            )
        [(status, body)] = _answerer(request, _answer_one)([(action_key, document.get("payload"))])
    return JsonResponse(body, status=status)


def _batch_items(document: dict) -> list:
    """The items of a batch call. Raises BodyRejected when there is no list to work through."""
    items = document.get("items")
    if not isinstance(items, list) or not items:
        raise BodyRejected(400, "malformed_json", "items must be a non-empty list")
    if len(items) > settings.RECEIVER_BATCH_LIMIT:
        raise BodyRejected(
            413,
            "too_many_items",
            f"at most {settings.RECEIVER_BATCH_LIMIT} items",
            settings.RECEIVER_BATCH_LIMIT,
        )
    return items


@csrf_exempt
@require_POST
@unavailable_during_outage
@injects_faults
def tasks_batch(request: HttpRequest) -> JsonResponse:
    """Up to RECEIVER_BATCH_LIMIT items, each answered as the single call would answer it; one item's
    conflict or rejection does not fail the others. One commit for the whole batch."""
    with transaction.atomic(using=services.DB):
        try:
            items = _batch_items(_signed_document(request))
        except _REFUSALS as exc:
            return _refusal(exc)
        results: list[dict] = [{"http_status": 400, "error": "malformed_item"} for _ in items]
        readable = [index for index, item in enumerate(items) if isinstance(item, dict)]
        answers = _answerer(request, _answer_many)(
            [(items[index].get("action_key"), items[index].get("payload")) for index in readable]
        )
        for index, (status, body) in zip(readable, answers, strict=True):
            results[index] = {"http_status": status, **body}
    return JsonResponse({"results": results})


def _lookup_keys(document: dict) -> list[str]:
    """The keys of a batch lookup. Raises BodyRejected when there is no list of keys, or too many."""
    keys = document.get("action_keys")
    if not isinstance(keys, list) or not keys or not all(isinstance(key, str) for key in keys):
        raise BodyRejected(400, "malformed_json", "action_keys must be a non-empty list of strings")
    if len(keys) > settings.RECEIVER_BATCH_LIMIT:
        raise BodyRejected(
            413,
            "too_many_items",
            f"at most {settings.RECEIVER_BATCH_LIMIT} keys",
            settings.RECEIVER_BATCH_LIMIT,
        )
    return keys


@csrf_exempt
@require_http_methods(["GET", "POST"])
@unavailable_during_outage
@refuses_lookups
@injects_faults
def tasks_lookup(request: HttpRequest) -> JsonResponse:
    """`POST /tasks/lookup` with {"action_keys": [...]} (at most RECEIVER_BATCH_LIMIT): the tasks of those keys
    that exist, each as `GET /tasks/<key>` reports it, and the keys that have none, in one request (a sender
    settling many unknown outcomes asks once, not once per key). Signed like every POST; the replay record is
    its only write."""
    if request.method == "GET":
        # Keys may be any text: a GET here is the lookup of the key "lookup".
        return task_detail(request, "lookup")
    with transaction.atomic(using=services.DB):
        try:
            keys = _lookup_keys(_signed_document(request))
        except _REFUSALS as exc:
            return _refusal(exc)
    # A key with NUL cannot be stored (PostgreSQL text refuses it), so no task has it.
    items = services.task_find_many(action_keys=[key for key in keys if "\x00" not in key])
    found = {item["action_key"] for item in items}
    return JsonResponse({"items": items, "missing": [key for key in keys if key not in found]})


@refuses_lookups
def _task_keys(request: HttpRequest) -> JsonResponse:
    try:
        _authenticate(request, "")
    except SignatureRejected as exc:
        return _refusal(exc)
    after = request.GET.get("after", "")
    if "\x00" in after:
        return _error(400, "bad_after", detail="after must not contain NUL")
    try:
        limit = min(max(int(request.GET.get("limit", 500)), 1), 5000)
    except ValueError:
        return _error(400, "bad_limit", detail="limit must be a whole number")
    items = services.task_list_keys(after=after, limit=limit)
    next_after = items[-1]["action_key"] if len(items) == limit else None
    return JsonResponse({"items": items, "next_after": next_after})


@csrf_exempt
@require_GET
@unavailable_during_outage
@refuses_lookups
def task_detail(request: HttpRequest, action_key: str) -> JsonResponse:
    try:
        _authenticate(request, "")
    except SignatureRejected as exc:
        return _refusal(exc)
    try:
        # A key with NUL cannot be stored (PostgreSQL text refuses it), so no task has it.
        if "\x00" in action_key:
            raise TaskNotFound(action_key)
        task = services.task_get(action_key=action_key)
    except TaskNotFound:
        return _error(404, "not_found", action_key=action_key, detail="no task has this action key")
    return JsonResponse(
        {
            "task_id": str(task.task_id),
            "action_key": task.action_key,
            "payload_hash": task.payload_hash,
            "status": task.status,
            "created_at": task.created_at.isoformat(),
        }
    )


@csrf_exempt
@require_http_methods(["GET", "POST"])
def task_status(request: HttpRequest, action_key: str) -> JsonResponse:
    """`POST /tasks/<key>/status` with {"status": "in_progress" | "done" | "failed"}: the people doing the task
    move its status forward. Read like every other POST: body checks, then the signature, then the JSON."""
    if request.method == "GET":
        # Keys may hold "/": a GET here is the lookup of a key that ends in "/status".
        return task_detail(request, f"{action_key}/status")
    # The replay record and the status change commit together.
    with transaction.atomic(using=services.DB):
        try:
            document = _signed_document(request)
        except _REFUSALS as exc:
            return _refusal(exc)
        try:
            if "\x00" in action_key:
                raise TaskNotFound(action_key)
            change = services.task_status_set(action_key=action_key, status=document.get("status"))
        except TaskNotFound:
            return _error(
                404, "not_found", action_key=action_key, detail="no task has this action key"
            )
        except InvalidTaskStatus as exc:
            return _error(422, exc.code, detail=exc.detail, action_key=action_key)
    task = change.task
    return JsonResponse(
        {
            "task_id": str(task.task_id),
            "action_key": task.action_key,
            "status": task.status,
            "previous_status": change.previous_status,
            "changed": change.changed,
        }
    )
