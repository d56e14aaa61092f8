"""Fault injection at the receiver, for tests and demos. Off unless RECEIVER_FAULTS is set.

RECEIVER_FAULTS is JSON:
    {"keys": {"onboarding:7:42:1": "drop_after_commit"},   # a fault for chosen action keys
     "fraction": 0.1, "kinds": ["http_503", "slow"],        # and/or for a share of all keys
     "seed": 1, "slow_seconds": 10, "retry_after": 2,
     "observe": "receiver-calls.log",                       # and/or a line per request, to measure the load
     "spells": "receiver-spells",                           # and/or kinds switched on and off by a file
     "lookups_refused": [429, "300"]}                        # and/or every lookup refused so, while set

Each fault fires once per action key, across every process of the receiver (the claim is a row in the
receiver's database), so the handoff can then recover.
Kinds that act before the task is created: http_401, http_429, http_500, http_503.
Kinds that act after it is committed (the sender cannot know it exists): drop_after_commit
(connection closed without an answer), slow (answer later than the client waits), malformed
(a 200 whose body is not a valid receipt).

The API opts in with `@injects_faults`: the wrapper stands between the API and the receiver's store
for each item, and acts on the connection once the view has committed. The API itself knows no fault.

"spells" names a file holding the kinds in force now (whitespace-separated; a schedule of faults writes it
whole, then renames it, as each spell begins and ends: tests/hosts/schedules.py): while a kind is in force,
every create call gets it, not once per key (a credential refused, receipts that lie, for as long as the spell
lasts). Spells are http_401 and malformed (SPELL_KINDS); each key's first is recorded as a fired fault.

"observe" names a file to which the wrapper appends one line per create call, `<method> <arrived> <answered>`
(Unix times): what a receiver sees of its senders' load (calls in flight at once, requests per second), for
tests of the senders' limits. The lines are written by every receiver process (appends of one short line).

"lookups_refused" is [status, Retry-After]: while set, every lookup (`GET /tasks/<key>`, the key listing
`GET /tasks`, the batch lookup `POST /tasks/lookup`) is answered with that status and header, and nothing is
read (`@refuses_lookups`); each refusal is a line in the "observe" file too, so a test counts what was asked.
"""

import contextlib
import hashlib
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import wraps
from pathlib import Path

from django.conf import settings
from django.db import connections
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils import timezone

from delivery.models import FiredFault

DB = "delivery"
BEFORE_COMMIT = frozenset({"http_401", "http_429", "http_500", "http_503"})
AFTER_COMMIT = frozenset({"drop_after_commit", "slow", "malformed"})
KINDS = BEFORE_COMMIT | AFTER_COMMIT
# In force for every call while their spell lasts; http_401 first when both are.
SPELL_KINDS = ("http_401", "malformed")
MALFORMED_RECEIPT = {"ok": True, "note": "injected malformed receipt"}

# One item of a create call, (action_key, payload), and the answer the API gives it, (status, body).
Item = tuple[object, object]
ItemAnswer = tuple[int, dict]
ItemsAnswerer = Callable[[list[Item]], list[ItemAnswer]]


@dataclass(frozen=True)
class Fault:
    kind: str
    slow_seconds: float = 10.0
    retry_after: int = 1

    @property
    def before_commit(self) -> bool:
        return self.kind in BEFORE_COMMIT

    def injected_answer(self) -> ItemAnswer:
        """The answer given instead of creating the task (before-commit kinds)."""
        status = int(self.kind.removeprefix("http_"))
        body = {"error": "injected_fault", "kind": self.kind}
        if status == 429:
            body["retry_after"] = self.retry_after
        return status, body


def _share(seed: object, key: str) -> float:
    digest = hashlib.sha256(f"{seed}:{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def _configured_kind(config: dict, action_key: str) -> str | None:
    kind = (config.get("keys") or {}).get(action_key)
    if kind is None and config.get("fraction"):
        seed = config.get("seed", 0)
        if _share(seed, action_key) < float(config["fraction"]):
            kinds = sorted(config.get("kinds") or KINDS)
            kind = kinds[int(_share(f"{seed}:kind", action_key) * len(kinds))]
    if kind is not None and kind not in KINDS:
        raise ValueError(f"unknown fault kind {kind!r}; expected one of {sorted(KINDS)}")
    return kind


def _claim(action_key: str, kind: str) -> bool:
    """True for the one call that fires this fault. Every receiver process (gunicorn worker) shares the
    table; a concurrent claim of the same row waits for the first to commit and then inserts nothing."""
    connection = connections[DB]
    table = connection.ops.quote_name(FiredFault._meta.db_table)
    fired_at = FiredFault._meta.get_field("fired_at").get_db_prep_value(timezone.now(), connection)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (action_key, kind, fired_at) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",  # noqa: S608
            [action_key, kind, fired_at],
        )
        return cursor.rowcount == 1


def _spell_in_force(config: dict) -> str | None:
    """The spell kind in force now (read from the "spells" file at each call), or None."""
    if not config.get("spells"):
        return None
    try:
        in_force = set(Path(config["spells"]).read_text(encoding="ascii").split())
    except (FileNotFoundError, UnicodeDecodeError):
        return None
    return next((kind for kind in SPELL_KINDS if kind in in_force), None)


def fault_for(action_key: object) -> Fault | None:
    """The fault to inject for this call, claiming it, or None."""
    config = settings.RECEIVER_FAULTS
    max_key = FiredFault._meta.get_field("action_key").max_length
    if not config or not isinstance(action_key, str) or not action_key or len(action_key) > max_key:
        return None
    if spell := _spell_in_force(config):
        _claim(action_key, spell)  # recorded once per key; fires on every call while in force
        kind = spell
    else:
        kind = _configured_kind(config, action_key)
        if kind is None or not _claim(action_key, kind):
            return None
    return Fault(
        kind=kind,
        slow_seconds=float(config.get("slow_seconds", 10)),
        retry_after=int(config.get("retry_after", 1)),
    )


def _drop_connection(request: HttpRequest, fault: Fault) -> None:
    """Simulate a response lost after commit: close the socket, or wait past the client's timeout."""
    sock = request.META.get("gunicorn.socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        sock.close()
        return
    time.sleep(fault.slow_seconds)


@dataclass
class _RequestFaults:
    """The faults that fired during one request, kept until the view has answered (and committed)."""

    fired: list[Fault] = field(default_factory=list)

    def wrap(self, answer_items: ItemsAnswerer) -> ItemsAnswerer:
        def answer_with_faults(items: list[Item]) -> list[ItemAnswer]:
            faults = [fault_for(action_key) for action_key, _payload in items]
            self.fired.extend(f for f in faults if f is not None)
            passed = [i for i, f in enumerate(faults) if f is None or not f.before_commit]
            # Items whose fault answers for them never reach the store (the API may not be called at all).
            answers = (
                dict(zip(passed, answer_items([items[i] for i in passed]), strict=True))
                if passed
                else {}
            )
            return [self._answer(faults[i], answers.get(i)) for i in range(len(items))]

        return answer_with_faults

    @staticmethod
    def _answer(fault: Fault | None, answer: ItemAnswer | None) -> ItemAnswer:
        if fault is None:
            return answer
        if fault.before_commit:
            return fault.injected_answer()
        if fault.kind == "malformed" and answer[0] in (200, 201):
            return 200, dict(MALFORMED_RECEIPT)
        return answer

    def after_commit(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        for fault in self.fired:
            if fault.kind == "http_429" and response.status_code == 429:
                response["Retry-After"] = str(fault.retry_after)
        for fault in self.fired:
            if fault.kind == "drop_after_commit":
                _drop_connection(request, fault)
                break
            if fault.kind == "slow":
                time.sleep(fault.slow_seconds)
                break
        return response


def _observe(path: str, method: str, arrived: float) -> None:
    with open(path, "a", encoding="ascii") as log:
        log.write(f"{method} {arrived:.6f} {time.time():.6f}\n")


def injects_faults(view):
    """View decorator: while RECEIVER_FAULTS is set, the view's item answers pass through the configured
    faults (request.wrap_item_answers), and connection faults act after the view has returned."""

    @wraps(view)
    def view_with_faults(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        # Read once: the setting may change while a request is being answered (a test's override ending while
        # a live server's thread still answers a call that outlived the test).
        config = settings.RECEIVER_FAULTS
        if not config:
            return view(request, *args, **kwargs)
        arrived = time.time()
        faults = _RequestFaults()
        request.wrap_item_answers = faults.wrap
        try:
            return faults.after_commit(request, view(request, *args, **kwargs))
        finally:
            if config.get("observe"):
                _observe(config["observe"], request.method, arrived)

    return view_with_faults


def refuses_lookups(view):
    """View decorator for the lookups: while RECEIVER_FAULTS names `lookups_refused` [status, Retry-After],
    that answer, and the view is not called."""

    @wraps(view)
    def view_or_refused(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        config = settings.RECEIVER_FAULTS  # read once, as `injects_faults` does
        refused = config.get("lookups_refused") if config else None
        if not refused:
            return view(request, *args, **kwargs)
        if config.get("observe"):
            _observe(config["observe"], request.method, time.time())
        status, retry_after = refused
        response = JsonResponse({"error": "lookup_refused"}, status=int(status))
        response["Retry-After"] = str(retry_after)
        return response

    return view_or_refused


def reset() -> None:
    """Forget which faults have fired, so that they fire again (tests)."""
    FiredFault.objects.using(DB).all().delete()
