"""A receiver outage on demand, for the demo: while it lasts, every call of the receiver's task API answers
503 `receiver_unavailable` and nothing is stored, as a receiver that is down for maintenance would. The
console then shows what an operator sees in an outage (the destination paused after consecutive failures,
its waiting handoffs saying since when and the next probe), and it ends by itself.

The switch is a file in the var directory holding the outage's end (a Unix time), shared by every process
of the receiver (gunicorn's workers) without a table or a migration: `manage.py demo_receiver_outage
--seconds 60` writes it, `--end` removes it. Without the file (always, outside a demo) a call costs one
failed `stat`."""

import time
from functools import wraps
from pathlib import Path

from django.conf import settings
from django.http import HttpRequest, JsonResponse


def switch_file() -> Path:
    return Path(settings.VAR_DIR) / "receiver-outage-until"


def outage_start(*, seconds: float) -> float:
    """Make the receiver unavailable for `seconds` from now; returns the end (Unix time)."""
    if seconds <= 0:
        raise ValueError("an outage lasts a positive number of seconds")
    ends = time.time() + seconds
    path = switch_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    # Written whole, then renamed: a receiver process never reads half a time.
    partial = path.with_suffix(".partial")
    partial.write_text(f"{ends:.3f}\n", encoding="ascii")
    partial.replace(path)
    return ends


def outage_end() -> None:
    switch_file().unlink(missing_ok=True)


def outage_ends_at() -> float | None:
    """The end of the outage in force (Unix time), or None."""
    try:
        ends = float(switch_file().read_text(encoding="ascii"))
    except (FileNotFoundError, ValueError):
        return None
    return ends if ends > time.time() else None


def unavailable_during_outage(view):
    """View decorator: 503 `receiver_unavailable` (no Retry-After: the sender does not know for how long)
    while an outage is in force; the view is not called."""

    @wraps(view)
    def view_or_unavailable(request: HttpRequest, *args, **kwargs):
        if outage_ends_at() is not None:
            return JsonResponse({"error": "receiver_unavailable"}, status=503)
        return view(request, *args, **kwargs)

    return view_or_unavailable
