"""What a log line is about: the handoff, its action key, destination and workspace, where known.

A log shipper groups lines by these fields, so they travel with the code path rather than in each
message: the request middleware binds them in a context variable (one per thread and per asyncio task, so
concurrent workers never mix them), and the log filter of `config/log_fields.py` copies them onto every
record; the dispatcher's record step puts them on its one line itself (`log_recorded`). A leaf module:
it imports nothing of the project.
"""

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar, Token
from typing import Any, Protocol

FIELDS = ("handoff_id", "action_key", "destination", "workspace")

_bound: ContextVar[dict[str, Any] | None] = ContextVar("handoff_log_fields", default=None)


def current() -> dict[str, Any]:
    """The fields bound now (a copy), without the unknown ones."""
    return dict(_bound.get() or {})


def bind(**fields: Any) -> Token:
    """Add fields to the current context (None leaves a field out); returns the token to `reset`."""
    unknown = set(fields) - set(FIELDS)
    if unknown:
        raise ValueError(f"not a log context field: {sorted(unknown)}")
    merged = {**(_bound.get() or {}), **{k: v for k, v in fields.items() if v is not None}}
    return _bound.set(merged)


def reset(token: Token) -> None:
    _bound.reset(token)


@contextmanager
def cleared() -> Iterator[None]:
    """Nothing bound for the block: a request starts from no fields, whatever its thread served before."""
    token = _bound.set(None)
    try:
        yield
    finally:
        _bound.reset(token)


@contextmanager
def bound(**fields: Any) -> Iterator[None]:
    """The fields hold for the block only (a request, one handoff's recording)."""
    token = bind(**fields)
    try:
        yield
    finally:
        reset(token)


class RecordedClaim(Protocol):
    handoff_id: int
    action_key: str


def log_recorded(
    logger: logging.Logger, claim: RecordedClaim, destination: str, state: str | None
) -> None:
    """The dispatcher's record step: one event per outcome written, carrying the handoff's fields (a
    refused outcome, its lease taken over, is logged by the dispatcher itself as a warning). The
    workspace is carried too once the claim carries it (a `workspace_id` attribute).

    The fields go on the line itself (`extra`), the same fields `bound` would have the log filter copy
    there (`config/log_fields.py` copies only those a line does not carry yet), without setting and
    resetting the context variable at each line: a plain line 0.90 of its CPU before. Nothing is built
    when the logger is off for INFO (the bench's dispatchers run at WARNING): 3.1 us a line to 0.13.
    The record is made here and handed to the logger's handlers as `Logger.info` would, without its search
    of the stack for the caller, which is always this function (`_RECORDED_AT`)."""
    if state is None or not logger.isEnabledFor(logging.INFO):
        return
    # As `bind`, a field that is None is left out: the claim's own are never None, the workspace may be.
    fields = {"handoff_id": claim.handoff_id, "action_key": claim.action_key}
    if destination is not None:
        fields["destination"] = destination
    if (workspace := getattr(claim, "workspace_id", None)) is not None:
        fields["workspace"] = workspace
    record = logger.makeRecord(
        logger.name,
        logging.INFO,
        *_RECORDED_AT,
        _RECORDED,
        (claim.action_key, state, destination),
        None,
        "log_recorded",
        fields,
    )
    logger.handle(record)


_RECORDED = "%s recorded %s at %s"
# Where the line is made, as `Logger.findCaller` would name it: this file, the function's first line.
_RECORDED_AT = (__file__, log_recorded.__code__.co_firstlineno)
