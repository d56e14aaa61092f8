"""What every destination kind offers, and what its answers about keys are.

A destination offers `deliver`, `lookup` and `list_keys`, and declares whether it honours the
idempotency key and whether it can be asked about a key. Everything else in the product (the
dispatcher, settlement, reconciliation) works through this interface; each kind's module says how
its receiver is reached.
"""

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Protocol

from outbox.destinations.work_status_config import WorkStatusSource
from outbox.failures import STATUS_MAX, TASK_ID_MAX, DeliveryResult, Outgoing, check_storable
from outbox.payloads import holds_sent
from outbox.retry import RetryPolicy


@dataclass(frozen=True)
class RemoteTask:
    action_key: str
    task_id: str
    payload_hash: str
    # The work's state as the receiver reports it (open, in_progress, done, failed); "" when not reported.
    status: str = ""
    # The payload the answer echoes, where the kind reads one (None: only `payload_hash` is known). Compared
    # with what was sent on the fields that were sent (`same_payload`): a provider's own fields are no conflict.
    echoed_payload: object = None

    def same_payload(self, payload: dict | None, payload_hash: str) -> bool:
        """Whether this task holds the payload sent: the same hash, or an echo holding every field sent."""
        if self.payload_hash == payload_hash:
            return True
        return (
            self.echoed_payload is not None
            and payload is not None
            and holds_sent(payload, self.echoed_payload)
        )


@dataclass(frozen=True)
class WorkAnswer:
    """A destination's answer when asked for one task's work (a pulled read): the value at the configured
    field as answered (None: not there), or that it has no such task (`found` False: the task is gone)."""

    found: bool
    value: object = None
    asked: str = ""


class LookupFailed(Exception):
    """The receiver could not be asked (network, credentials): nothing is known. When the answer asked for a
    wait (a 429 or 503 with Retry-After, or the destination's token endpoint's), `status_code` (None for the
    token endpoint's), `reason_code` and `retry_after` (seconds) say so: the lookup's permit then holds the
    whole destination as a delivery's answer does (`outbox/limit_rules.py` `Permit.asked_to_wait`)."""

    def __init__(
        self,
        message: str = "",
        *,
        status_code: int | None = None,
        reason_code: str = "",
        retry_after: float | None = None,
        asked: bool = True,
    ):
        super().__init__(message)
        self.status_code = status_code
        self.reason_code = reason_code
        self.retry_after = retry_after
        # Whether a request reached the receiver, whatever the words say: False for a lookup refused before
        # asking, by its destination's limits or a hold (`outbox/services/lookup_limits.py` DestinationBusy)
        # or by its token endpoint (no token: the API was not called, `lookup_without_credentials`). Every
        # place that settles or previews reads this flag, never the exception's type or words.
        self.asked = asked

    @property
    def why(self) -> str:
        """What failed (asked), or what refused the lookup before asking (not asked), without NOT_ASKED."""
        return str(self)


class BatchRefused(Exception):
    """The receiver refused a batch call as too large (HTTP 413) before reading it: nothing was created. The
    destination sends one call per handoff for a while (`batching()` is False); the caller gives the claims back."""


# remote_task runs once a key of every listing page (a reconciliation over http: a million calls a run), so it
# checks the common answer inline and builds the frozen task in one step instead of a setattr a field; any
# answer the inline check does not pass goes through check_storable, which refuses it with its reason.
_new_object = object.__new__
_set_attribute = object.__setattr__


def remote_task(item: dict) -> RemoteTask:
    """A task as the receiver reports it; ValueError when it is more than the outbox row can hold."""
    task_id, status = item["task_id"], item.get("status") or ""
    if not (
        type(task_id) is str
        and len(task_id) <= TASK_ID_MAX
        and type(status) is str
        and len(status) <= STATUS_MAX
    ):
        check_storable(task_id, status)
    task = _new_object(RemoteTask)
    _set_attribute(
        task,
        "__dict__",
        {
            "action_key": item["action_key"],
            "task_id": task_id,
            "payload_hash": item["payload_hash"],
            "status": status,
            "echoed_payload": None,
        },
    )
    return task


class Lookups(Protocol):
    """What settlement and reconciliation ask a receiver: a key's task (with its work status) and the listing
    of keys, and what the destination's answers are worth (idempotency, whether it can be asked at all). A
    `Destination` is one; so is `outbox.services.lookup_limits.LimitedLookups`, which asks one under its limits."""

    name: str
    supports_idempotency: bool
    supports_lookup: bool
    # A repeat with the same key and body answers the original: sending again settles an unknown outcome.
    replays_same_key: bool

    # How many keys one request may ask about (`lookup_many`); 0: one key per request (`lookup`).
    lookup_batch_size: int

    def lookup(self, action_key: str) -> RemoteTask | None: ...

    def lookup_many(self, action_keys: list[str]) -> dict[str, RemoteTask | None]: ...

    def list_keys(self, *, after: str = "", limit: int = 500) -> list[RemoteTask]: ...

    def describe(self) -> str: ...


class Destination(ABC):
    """A receiving system, reached by one kind (a module of this package, registered in `registry.KINDS`)."""

    name = "receiver"
    supports_idempotency = True
    supports_lookup = True
    supports_batch = False
    # A destination that answers for many keys in one request declares how many (its batch lookup's limit);
    # 0: it is asked one key per request. Settlement asks in requests of this size (`outbox/settlement/passes.py`).
    lookup_batch_size = 0
    retry_policy = RetryPolicy()
    # The longest one call can take (connect + read timeout): what a lease must outlast
    # (`lease_rule.py`), and the configuration keys that add up to it.
    call_seconds = 0.0
    call_seconds_keys: tuple[str, ...] = ("connect_timeout", "read_timeout")
    # A repeat with the same key and body answers the original (the IETF Idempotency-Key draft's replay): an
    # uncertain outcome may be settled by sending the same request again (docs/destinations.md).
    replays_same_key = False
    # How a delivered step is undone here: "native" (the receiver takes the compensating operation as a task
    # under its own key), "request" (a configured undo request), "" (nothing: a person undoes it by hand).
    undo = ""
    # How its work status is learnt: done when delivered, pushed, or pulled (`work_status_config.py`); set
    # from the configuration's `work_status` by the registry.
    work_status = WorkStatusSource()

    @classmethod
    @abstractmethod
    def from_config(cls, config: dict) -> "Destination":
        """The destination a configuration (settings.HANDOFF_DESTINATION without its `kind`) describes."""

    @abstractmethod
    def deliver(self, outgoing: Outgoing) -> DeliveryResult: ...

    def deliver_batch(self, outgoings: list[Outgoing]) -> list[DeliveryResult]:
        """One result per item, in order. Destinations that declare `supports_batch` do it in one call."""
        return [self.deliver(outgoing) for outgoing in outgoings]

    def batching(self) -> bool:
        """Whether a claim batch goes in one call now (declared, and not refused as too large lately)."""
        return self.supports_batch

    @abstractmethod
    def lookup(self, action_key: str) -> RemoteTask | None:
        """The receiver's task for the key, None when it has none; LookupFailed when unknown."""

    def lookup_many(self, action_keys: list[str]) -> dict[str, RemoteTask | None]:
        """Every key's task (None: the receiver has none), in one request where the kind answers for many keys
        (`lookup_batch_size`, at most that many keys); here one `lookup` per key. LookupFailed when unknown."""
        return {action_key: self.lookup(action_key) for action_key in action_keys}

    @abstractmethod
    def list_keys(self, *, after: str = "", limit: int = 500) -> list[RemoteTask]: ...

    def close(self) -> None:  # noqa: B027 - optional: most kinds hold nothing open
        pass

    @abstractmethod
    def describe(self) -> str:
        """Where handoffs of this destination go, for the people watching them."""

    def describe_contract(self) -> str:
        """The contract in words (idempotency, lookup, batch); a kind says more of its own."""
        idempotency = (
            "idempotent by the action key"
            if self.supports_idempotency
            else "not idempotent: the effect ledger decides"
        )
        lookup = "lookup by key" if self.supports_lookup else "no lookup: a person checks"
        if self.supports_lookup and self.lookup_batch_size > 1:
            lookup += f" (up to {self.lookup_batch_size} keys a request)"
        return f"{idempotency}; {lookup}; {'batch' if self.supports_batch else 'no batch'}"

    def undo_missing(self, step_key: str, receipt_id: str) -> str:
        """Why a delivered step here cannot be undone by a request (what a person undoes by hand); "" when it
        can."""
        if self.undo:
            return ""
        return (
            f"{self.name} has no undo: undo by hand {receipt_id or '(no receipt id)'} "
            f"(key {step_key}) at {self.name}"
        )

    def undo_payload_fields(self) -> frozenset[str] | None:
        """The fields of the approved payload an undo here sends: None, every one (the compensating operation
        goes as a task holding the whole payload); a kind whose undo is a request of its own names them."""
        return None

    def read_work(self, *, receipt_id: str, action_key: str) -> WorkAnswer:
        """Ask the destination for one task's work (its pulled `work_status.read`); LookupFailed when
        nothing is known. Only kinds that can be asked over HTTP read it (`PULLABLE_KINDS`)."""
        raise LookupFailed(f"{self.name} cannot be asked for its work status")

    def credentials_missing(self) -> list[str]:
        """The secrets it cannot find now, each naming its variable or file (never a value)."""
        return []
