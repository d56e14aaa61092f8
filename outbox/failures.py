"""What a destination's answer means: delivered, or which failure class and reason code.

An HTTP 200 is execution evidence; only a receipt that passes `validate_receipt` is outcome
evidence. Everything that does not prove the outcome either way is `uncertain`.
"""

from dataclasses import dataclass
from datetime import datetime
from email.utils import parsedate_to_datetime

from django.utils import timezone

from outbox.models import FailureClass, Handoff

# What the outbox row holds of a receipt: a longer task id or work status would be cut short by the database
# (or refused by it), and a stored task id that is not the receiver's is worse than none.
TASK_ID_MAX = Handoff._meta.get_field("destination_id").max_length
STATUS_MAX = Handoff._meta.get_field("work_status").max_length


@dataclass(frozen=True)
class UndoTarget:
    """What a compensation reverses: the step's action key and the receipt id its delivery returned."""

    action_key: str
    receipt_id: str


@dataclass(frozen=True)
class Outgoing:
    """What is sent: the stable action key and the exact approved payload (the body of the request approved
    with it, where the route maps one: `request`); for a compensation, `undo` names the delivered step it
    reverses (a destination with an undo request sends that, never its create)."""

    action_key: str
    payload: dict
    payload_hash: str
    undo: UndoTarget | None = None
    # The request rendered at approval and frozen in the handoff ({"body", "path", "query", "headers"}),
    # None where the route maps none (lib/request_mapping.py; `payload` is then its body).
    request: dict | None = None


@dataclass(frozen=True)
class DeliveryResult:
    delivered: bool
    task_id: str = ""
    created: bool | None = None
    failure_class: str = ""
    reason_code: str = ""
    status_code: int | None = None
    detail: str = ""
    retry_after: float | None = None
    latency_ms: int | None = None
    # The validated receipt as received (kept for replay and audit), and the work status it reports.
    receipt: dict | None = None

    @classmethod
    def ok(
        cls, *, task_id: str, created: bool, status_code: int | None = None, **extra
    ) -> "DeliveryResult":
        return cls(
            delivered=True, task_id=task_id, created=created, status_code=status_code, **extra
        )

    @classmethod
    def failed(
        cls, failure_class: str, reason_code: str, detail: str = "", **extra
    ) -> "DeliveryResult":
        return cls(
            delivered=False,
            failure_class=failure_class,
            reason_code=reason_code,
            detail=detail,
            **extra,
        )


# Answers that say the destination itself cannot take calls: nothing about the handoff is wrong. They count
# towards pausing the destination, and against a handoff's retry window but not its attempts.
API_UNREACHABLE_REASONS = frozenset(
    {"connect_failed", "connect_timeout", "http_500", "http_502", "http_503", "http_504"}
)
# The same of the destination's OAuth2 token endpoint (`credentials/oauth2.py`): no call can reach the API
# without a token, so they count as its outage does, under names of their own, so that a pause, its hold and
# its incident say which of the two is down. A 429 is a wait, not an outage, for either.
TOKEN_ENDPOINT_PREFIX = "token_endpoint_"  # noqa: S105 (a reason code, no secret)
TOKEN_ENDPOINT_UNAVAILABLE_REASONS = frozenset(
    {f"{TOKEN_ENDPOINT_PREFIX}{code}" for code in API_UNREACHABLE_REASONS}
    | {f"{TOKEN_ENDPOINT_PREFIX}unavailable"}
)
UNREACHABLE_REASONS = API_UNREACHABLE_REASONS | TOKEN_ENDPOINT_UNAVAILABLE_REASONS


class MalformedReceipt(ValueError):
    pass


def check_storable(task_id: object, status: object) -> None:
    """A receiver's task id and work status (None: none given) fit the outbox row; MalformedReceipt (a
    ValueError) says which does not. For receipts, lookups and key listings alike."""
    if not isinstance(task_id, str):
        raise MalformedReceipt("task_id is not a text")
    if len(task_id) > TASK_ID_MAX:
        raise MalformedReceipt(f"task_id is longer than {TASK_ID_MAX} characters")
    if status is not None and (not isinstance(status, str) or len(status) > STATUS_MAX):
        raise MalformedReceipt(f"status is not a text of at most {STATUS_MAX} characters")


def validate_receipt(body: object, sent: Outgoing) -> tuple[str, bool]:
    """Return (task_id, created) from a receipt, or raise MalformedReceipt saying what is wrong."""
    if not isinstance(body, dict):
        raise MalformedReceipt("receipt is not a JSON object")
    task_id = body.get("task_id")
    if not isinstance(task_id, str) or not task_id.strip():
        raise MalformedReceipt("receipt has no task_id")
    check_storable(task_id, body.get("status"))
    if body.get("action_key") != sent.action_key:
        raise MalformedReceipt("receipt action_key does not echo the key sent")
    if body.get("payload_hash") != sent.payload_hash:
        raise MalformedReceipt("receipt payload_hash does not echo the payload sent")
    created = body.get("created")
    if not isinstance(created, bool):
        raise MalformedReceipt("receipt has no boolean 'created'")
    return task_id, created


def parse_retry_after(value: str | None, *, date: str | None = None) -> float | None:
    """Seconds to wait from a `Retry-After` header: a number of seconds, or an HTTP date. A date is the
    receiver's clock, so it is measured from the answer's own `Date` header when given (RFC 9110 §10.2.3: both
    on the receiver's clock, whatever this host's clock says); without one, from this host's clock. The wait
    is then added to the database's now where it is stored (`db_now_plus`)."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value)
            seconds = (when - _answer_time(date)).total_seconds()
        except (TypeError, ValueError):
            return None
    return max(seconds, 0.0)


def _answer_time(date: str | None) -> datetime:
    """When the receiver answered, by its clock (its `Date` header), else this host's time."""
    try:
        return parsedate_to_datetime(date) if date else timezone.now()
    except (TypeError, ValueError):
        return timezone.now()


def classify_status(status: int) -> tuple[str, str]:
    """Failure class and reason code of a non-success HTTP status."""
    if status == 409:
        return FailureClass.CONFLICT, "key_conflict"
    if status in (401, 403):
        return FailureClass.CREDENTIAL, "credential_rejected"
    if status == 429:
        return FailureClass.TRANSIENT, "rate_limited"
    if status in (400, 413, 422):
        return FailureClass.PERMANENT, {
            400: "bad_request",
            413: "payload_too_large",
            422: "payload_invalid",
        }[status]
    if status in (502, 503, 504):
        return FailureClass.TRANSIENT, f"http_{status}"
    if status >= 500:
        # A 500 may come after the receiver committed: the outcome is not known.
        return FailureClass.UNCERTAIN, f"http_{status}"
    return FailureClass.PERMANENT, f"http_{status}"
