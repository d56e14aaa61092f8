"""The bench's receiver (`config.wsgi` under gunicorn) with its own timing of each create call: when the
request reached the receiver (under `bench/receiver_timing_worker.py`'s worker class: gunicorn's poller found
its bytes to read and handed its connection to a thread; without it, when this WSGI callable was entered),
when its handler started, when the receiver's transaction committed (an `on_commit` callback of the delivery
database, run right after its COMMIT returned) and the action keys it carried. `time.time()`, this host's
clock, the one the bench's producers note their approvals' commits on and PostgreSQL stamps the claims with.

Only while the file named by BENCH_RECEIVER_TIMING exists (a latency run creates it, reads it, removes it):
otherwise a request costs one `stat` more. One JSON line a call, appended (O_APPEND: whole lines from every
worker and thread)."""

import io
import json
import os
import time

from django.db import connections

from bench.receiver_timing_worker import current as _calls
from config.wsgi import application as receiver

TIMING_FILE = os.environ.get("BENCH_RECEIVER_TIMING", "")


def _on_first_statement(execute, sql, params, many, context):
    """Inside the receiver's transaction, once a call: note the time its COMMIT returns."""
    connection = context["connection"]
    if connection.in_atomic_block and not _calls.hooked:
        _calls.hooked = True
        connection.on_commit(lambda: setattr(_calls, "committed", time.time()))
    return execute(sql, params, many, context)


def carried_keys(body: bytes) -> list[str]:
    """The action keys of a create call's body: one (`POST …/tasks`) or a batch's (`POST …/tasks/batch`)."""
    try:
        document = json.loads(body)
    except ValueError:
        return []
    if not isinstance(document, dict):
        return []
    items = document.get("items") if isinstance(document.get("items"), list) else [document]
    return [item["action_key"] for item in items if isinstance(item, dict) and "action_key" in item]


def application(environ, start_response):
    if (
        not TIMING_FILE
        or environ.get("REQUEST_METHOD") != "POST"
        or not os.path.exists(TIMING_FILE)
    ):
        return receiver(environ, start_response)
    handled = time.time()
    readable = getattr(_calls, "readable", None)
    length = int(environ.get("CONTENT_LENGTH") or 0)
    body = environ["wsgi.input"].read(length) if length else b""
    environ["wsgi.input"] = io.BytesIO(body)
    _calls.hooked, _calls.committed = False, None
    with connections["delivery"].execute_wrapper(_on_first_statement):
        response = receiver(environ, start_response)
    answered = time.time()
    if _calls.committed is not None:
        line = {
            "keys": carried_keys(body),
            "arrived": readable or handled,
            "handled": handled,
            "committed": _calls.committed,
            "answered": answered,
        }
        with open(TIMING_FILE, "a") as timing:
            timing.write(json.dumps(line) + "\n")
    return response
