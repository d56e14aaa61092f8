"""A destination's whole contract run against it with a probe key (`manage.py destinations probe NAME`, and
the console's "Run the whole contract"): meant for the provider's sandbox, where the destination's row
points while it is proven.

Five parts, each with a verdict (ok, failed, skipped: why) and its evidence (status, id, elapsed ms; never a
secret): create (the probe body under the probe key), receipt (its id read where `receipt` says), repeat
(the same key and body again: the same id, or "already there"), lookup (by the key: found, the same id, the
fields sent), undo (where configured: its success status, then the lookup finds nothing). Calls go through
the destination's own `deliver` and `lookup`, as the dispatcher's do, and an answer asking to wait (a 429
or 503 with Retry-After) holds the destination as theirs does; no handoff and no attempt is written, only one
DestinationEvent "probe" with the verdicts. A held destination is not probed unless the person means it
(`probe_holds`, `despite_holds`).
"""

import secrets
import time
from dataclasses import dataclass

from django.db import transaction

from lib.databases import DB
from outbox.destinations.base import Destination, LookupFailed, RemoteTask
from outbox.destinations.http.destination import HttpDestination
from outbox.destinations.idempotency_key.contract import NOT_REPORTED
from outbox.destinations.idempotency_key.destination import IdempotencyKeyHttpDestination
from outbox.destinations.registry import (
    DestinationUnavailable,
    credentials_checked,
    destination_named,
)
from outbox.errors import OutboxError
from outbox.failures import DeliveryResult, Outgoing, UndoTarget
from outbox.hold_lines import destination_holds_now
from outbox.limit_rules import Permit
from outbox.models import DestinationEvent, FailureClass
from outbox.payloads import payload_hash
from outbox.services.limits import destination_release

# Kinds whose contract a probe can run: an HTTP API with a create, a repeat and a lookup of its own.
PROBED_KINDS = {"http", "idempotency_key_http"}
PROBE_KEY_PREFIX = "probe:"
# What a probe creates where the destination names no `probe_body`.
PROBE_BODY = {
    "handoff_probe": True,
    "note": "created by `manage.py destinations probe`: safe to delete",
}
OK, FAILED, SKIPPED = "ok", "failed", "skipped"


class ProbeRefused(OutboxError):
    """The destination is not probed (unknown, disabled, not buildable, a key that is no probe key)."""


class ProbeHeld(ProbeRefused):
    """A hold is live on the destination (`probe_holds`): not probed unless the person says they mean it."""


def probe_holds(name: str) -> str:
    """Why a person's probe or connection test does not ask the destination now ("": nothing holds it): every
    live hold, in the words of its page (an operator's pause or window: a person said no calls; its breaker's
    pause or a credential hold: its own probes test it on their schedule; a Retry-After hold: it asked to be
    left alone; an unservable hold). The console's tests and `manage.py destinations probe` ask this alike."""
    holds = destination_holds_now(name)
    return holds.text if holds.held else ""


@dataclass(frozen=True)
class ProbePart:
    name: str  # create, receipt, repeat, lookup, undo
    verdict: str  # OK, FAILED, SKIPPED
    evidence: str

    def __str__(self) -> str:
        return f"{self.name}: {self.verdict}: {self.evidence}"


@dataclass(frozen=True)
class ProbeReport:
    destination: str
    key: str
    parts: tuple[ProbePart, ...]
    # The holds live when it was sent anyway (`despite_holds`), "" for none.
    despite: str = ""

    @property
    def failed(self) -> bool:
        return any(part.verdict == FAILED for part in self.parts)

    def lines(self) -> list[str]:
        return [str(part) for part in self.parts]


def probe_key() -> str:
    return f"{PROBE_KEY_PREFIX}{secrets.token_hex(8)}"


def probeable(destination: Destination) -> bool:
    return isinstance(destination, HttpDestination | IdempotencyKeyHttpDestination)


def _elapsed(started: float) -> str:
    return f"{int((time.monotonic() - started) * 1000)} ms"


def _failure(result: DeliveryResult) -> str:
    status = f"HTTP {result.status_code}" if result.status_code else "no answer"
    return f"{status}, {result.failure_class} ({result.reason_code}): {result.detail}"


@dataclass
class _Run:
    """One probe's calls and what they learnt (the id the create or the lookup named)."""

    destination: Destination
    sent: Outgoing
    # What the answers asked for: a 429 or 503 with Retry-After holds the destination as a delivery's or a
    # lookup's does (`Permit.asked_to_wait`, the hold written by `destination_release`). No slot is taken.
    waits: Permit
    task_id: str = ""
    found: RemoteTask | None = None

    def _deliver(self, outgoing: Outgoing) -> DeliveryResult:
        result = self.destination.deliver(outgoing)
        self.waits.made([result])
        return result

    def _lookup(self) -> RemoteTask | None:
        try:
            return self.destination.lookup(self.sent.action_key)
        except LookupFailed as exc:
            self.waits.asked_to_wait(
                status_code=exc.status_code,
                reason_code=exc.reason_code,
                retry_after=exc.retry_after,
            )
            raise

    def create(self) -> tuple[ProbePart, ProbePart, DeliveryResult]:
        started = time.monotonic()
        result = self._deliver(self.sent)
        elapsed = _elapsed(started)
        if result.delivered:
            self.task_id = result.task_id
            return (
                ProbePart("create", OK, f"HTTP {result.status_code} in {elapsed}"),
                ProbePart("receipt", OK, f"id {result.task_id}"),
                result,
            )
        if result.failure_class == FailureClass.MALFORMED and result.status_code:
            # The provider took it (2xx) but its answer does not hold the id where `receipt` says.
            return (
                ProbePart("create", OK, f"HTTP {result.status_code} in {elapsed}"),
                ProbePart("receipt", FAILED, result.detail),
                result,
            )
        skipped = ProbePart("receipt", SKIPPED, "the create failed")
        return ProbePart("create", FAILED, f"{_failure(result)} ({elapsed})"), skipped, result

    def repeat(self) -> ProbePart:
        if not self.destination.supports_idempotency:
            return ProbePart("repeat", SKIPPED, "no idempotency: a repeat would be a second effect")
        if not self.task_id:
            return ProbePart("repeat", SKIPPED, "the create named no id to compare with")
        started = time.monotonic()
        result = self._deliver(self.sent)
        elapsed = _elapsed(started)
        if not result.delivered:
            return ProbePart("repeat", FAILED, f"{_failure(result)} ({elapsed})")
        if result.task_id != self.task_id:
            return ProbePart(
                "repeat",
                FAILED,
                f"HTTP {result.status_code} in {elapsed}: a second entry, id {result.task_id} "
                f"where the create answered {self.task_id}",
            )
        # Whether the answer says it replayed (a header, a duplicate's "already there") is the provider's.
        said = ", answered as a replay" if result.created is False else ""
        return ProbePart(
            "repeat",
            OK,
            f"HTTP {result.status_code} in {elapsed}: same id {result.task_id}{said}",
        )

    def lookup(self) -> ProbePart:
        if not self.destination.supports_lookup:
            return ProbePart(
                "lookup", SKIPPED, "no lookup configured: a person checks an unknown outcome"
            )
        started = time.monotonic()
        try:
            found = self._lookup()
        except LookupFailed as exc:
            return ProbePart("lookup", FAILED, f"{exc} ({_elapsed(started)})")
        elapsed = _elapsed(started)
        if found is None:
            return ProbePart("lookup", FAILED, f"found nothing for the key ({elapsed})")
        self.found = found
        if self.task_id and found.task_id != self.task_id:
            return ProbePart(
                "lookup", FAILED, f"found id {found.task_id}, the create answered {self.task_id}"
            )
        self.task_id = self.task_id or found.task_id
        if found.same_payload(self.sent.payload, self.sent.payload_hash):
            return ProbePart(
                "lookup", OK, f"found id {found.task_id}, the fields sent match ({elapsed})"
            )
        if found.echoed_payload is None and found.payload_hash == NOT_REPORTED:
            return ProbePart(
                "lookup",
                OK,
                f"found id {found.task_id} ({elapsed}); the fields sent are not compared: the lookup "
                "echoes neither payload nor payload_hash, so a person compares",
            )
        return ProbePart(
            "lookup", FAILED, f"found id {found.task_id} holding other values than sent ({elapsed})"
        )

    def undo(self) -> ProbePart:
        if self.destination.undo != "request":
            why = "no undo configured: a person undoes by hand"
            if self.destination.undo == "native":
                why = "the receiver takes a compensation as a task of its own: not probed"
            left = f"; the probe's entry {self.task_id} stays there" if self.task_id else ""
            return ProbePart("undo", SKIPPED, f"{why}{left}")
        if not self.task_id:
            return ProbePart("undo", SKIPPED, "no id to undo: neither create nor lookup named one")
        undo = Outgoing(
            action_key=f"{self.sent.action_key}:compensate",
            payload=self.sent.payload,
            payload_hash=self.sent.payload_hash,
            undo=UndoTarget(action_key=self.sent.action_key, receipt_id=self.task_id),
        )
        started = time.monotonic()
        result = self._deliver(undo)
        elapsed = _elapsed(started)
        if not result.delivered:
            return ProbePart("undo", FAILED, f"{_failure(result)} ({elapsed})")
        return self._after_undo(f"HTTP {result.status_code} in {elapsed}")

    def _after_undo(self, answered: str) -> ProbePart:
        if not self.destination.supports_lookup:
            return ProbePart("undo", OK, f"{answered} (no lookup to see it gone)")
        try:
            still = self._lookup()
        except LookupFailed as exc:
            return ProbePart("undo", FAILED, f"{answered}; the lookup after it failed: {exc}")
        if still is not None:
            return ProbePart(
                "undo", FAILED, f"{answered}, but the lookup still finds id {still.task_id}"
            )
        return ProbePart("undo", OK, f"{answered}; the lookup finds nothing for the key")


def _destination(name: str) -> Destination:
    try:
        destination = credentials_checked(destination_named(name))
    except DestinationUnavailable as exc:
        raise ProbeRefused(f"not probed: {exc}") from None
    if not probeable(destination):
        raise ProbeRefused(
            f"not probed: {name} is of a kind whose contract a probe cannot run "
            f"(probed: {', '.join(sorted(PROBED_KINDS))})"
        )
    return destination


def probe_body_of(destination: Destination) -> dict:
    if isinstance(destination, IdempotencyKeyHttpDestination) and destination.config.probe_body:
        return destination.config.probe_body
    return PROBE_BODY


def destination_probe(
    *,
    name: str,
    actor_label: str,
    key: str | None = None,
    body: dict | None = None,
    actor=None,
    despite_holds: bool = False,
) -> ProbeReport:
    """Run the destination's contract with a probe key (`probe:<random>` unless given; ProbeRefused for any
    other) and record one DestinationEvent "probe" with the verdicts. ProbeHeld, nothing sent, while a hold
    is live (`probe_holds`), unless `despite_holds`: the event then names the holds it went through."""
    key = key or probe_key()
    if not key.startswith(PROBE_KEY_PREFIX) or len(key) <= len(PROBE_KEY_PREFIX):
        raise ProbeRefused(f"not probed: a probe key starts with {PROBE_KEY_PREFIX!r}, not {key!r}")
    destination = _destination(name)
    held = _held_unless_meant(name, despite_holds)
    body = body if body is not None else probe_body_of(destination)
    sent = Outgoing(action_key=key, payload=body, payload_hash=payload_hash(body))
    run = _Run(destination, sent, Permit(destination=name, holder=actor_label, requests=0))
    try:
        parts = _run_parts(run)
    finally:
        destination_release(permit=run.waits)
    report = ProbeReport(destination=name, key=key, parts=parts, despite=held)
    _record(report, actor_label=actor_label, actor=actor)
    return report


def _run_parts(run: _Run) -> tuple[ProbePart, ...]:
    create, receipt, created = run.create()
    reached = created.delivered or receipt.verdict == FAILED
    skipped = ProbePart("", SKIPPED, "the create failed")
    return (
        create,
        receipt,
        run.repeat() if created.delivered else _named(skipped, "repeat"),
        run.lookup() if reached else _named(skipped, "lookup"),
        run.undo() if reached else _named(skipped, "undo"),
    )


def _held_unless_meant(name: str, despite_holds: bool) -> str:
    """The holds live now ("" for none); ProbeHeld while there are and the person did not say they mean it."""
    held = probe_holds(name)
    if held and not despite_holds:
        raise ProbeHeld(f"not probed, nothing sent: {name} is held ({held})")
    return held


def _named(part: ProbePart, name: str) -> ProbePart:
    return ProbePart(name, part.verdict, part.evidence)


def _record(report: ProbeReport, *, actor_label: str, actor) -> None:
    verdict = "failed" if report.failed else "ok"
    with transaction.atomic(using=DB):
        DestinationEvent.objects.using(DB).create(
            destination=report.destination,
            from_state="",
            to_state="",
            actor=actor,
            actor_label=actor_label,
            action="probe",
            reason=f"probe {report.key}: {verdict}{_despite(report)}\n" + "\n".join(report.lines()),
        )


def _despite(report: ProbeReport) -> str:
    return f" (sent despite its holds: {report.despite})" if report.despite else ""
