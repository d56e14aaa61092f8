"""Per-caller limits on the calls that cost (ASVS 5.0 2.4.1): a signed-in person's handoff search, audit export,
replay previews and bulk actions, and each client address of the signed APIs (intake, status events). Over its
limit a call is answered 429 with Retry-After, and nothing of it is done.

The limiter is the destinations' (`outbox/services/limits.py` `slot_take_for`): `calls` slots per caller and
function, each held for `seconds` on the database clock, shared by every web process; the numbers are
`CALL_LIMITS` in config/settings/operations.py (docs/security.md, "Limits on costly calls")."""

import functools
import hashlib
import math

from django.conf import settings
from django.http import HttpResponse, JsonResponse

from outbox.errors import OutboxError
from outbox.services.limits import slot_take_for

# A caller's key is no destination's: a destination name never holds ":" (DESTINATION_NAME,
# outbox/models/destination_configs.py).
KEY_PREFIX = "call:"
KEY_LENGTH = 40  # DestinationSlot.destination


class CallLimited(OutboxError):
    """The caller made `calls` of this function within `seconds`; `retry_after` whole seconds to wait."""

    def __init__(self, function: str, calls: int, seconds: int, retry_after: int):
        self.retry_after = retry_after
        super().__init__(
            f"Too many requests: {function} is limited to {calls} in {seconds} seconds for each "
            f"{'client' if function.endswith('api') else 'person'}. Nothing was done; try again in "
            f"{retry_after} second{'s' if retry_after != 1 else ''}."
        )


def call_take(*, function: str, caller: str) -> None:
    """Count one call of `function` by `caller`, or raise CallLimited (nothing counted)."""
    calls, seconds = settings.CALL_LIMITS[function]
    key = f"{KEY_PREFIX}{function}:{caller}"
    if len(key) > KEY_LENGTH:
        # Cut, two callers (an IPv6 address and its neighbour) would share a count: a digest keeps them apart.
        key = KEY_PREFIX + hashlib.sha256(key.encode()).hexdigest()[: KEY_LENGTH - len(KEY_PREFIX)]
    wait = slot_take_for(key=key, limit=calls, holder=key, seconds=seconds)
    if wait:
        raise CallLimited(function, calls, seconds, max(1, math.ceil(wait)))


def _caller(request) -> str:
    if request.user.is_authenticated:
        return f"user:{request.user.pk}"
    return f"addr:{request.META.get('REMOTE_ADDR', '')}"


def _refusal(exc: CallLimited, as_json: bool) -> HttpResponse:
    if as_json:
        answer = JsonResponse(
            {"error": "rate_limited", "detail": str(exc), "retry_after": exc.retry_after},
            status=429,
        )
    else:
        answer = HttpResponse(str(exc) + "\n", status=429, content_type="text/plain; charset=utf-8")
    answer["Retry-After"] = str(exc.retry_after)
    return answer


def calls_limited(function: str, *, when=lambda request: True, as_json: bool = False):
    """A view decorator: the signed-in user's (else the client address's) call of `function` is counted
    before the view runs, when `when(request)` says the call is one that costs; over the limit, 429 (in the
    signed APIs' JSON with `as_json`)."""

    def decorate(view):
        @functools.wraps(view)
        def limited(request, *args, **kwargs):
            if when(request):
                try:
                    call_take(function=function, caller=_caller(request))
                except CallLimited as exc:
                    return _refusal(exc, as_json)
            return view(request, *args, **kwargs)

        return limited

    return decorate
