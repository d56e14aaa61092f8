"""The kinds of destination, by the name a configuration gives them (healthchecks' `TRANSPORTS`), and the
destinations themselves: rows of `DestinationConfig`, each built by its kind and kept per process.

A new kind is a module of this package with a `Destination` subclass (its `from_config` reads its
configuration and refuses any key it does not take), named in KINDS.

Settings only seed: while no row of the default destination's name exists, the default destination is
built from `settings.HANDOFF_DESTINATION` (the environment's RECEIVER_URL and friends), so a fresh checkout,
the test suite and the benchmarks run without any row. `manage.py destinations apply FILE` writes rows;
once a row of that name exists, the row wins.
"""

import json
import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import connections

from lib.databases import DB, compiled_once, prepared_cursor, rows_compiled_once
from lib.json_config import json_path
from outbox.destinations.base import Destination
from outbox.destinations.credentials.secret_places import env_refusal, file_refusal, secret_file
from outbox.destinations.http.destination import DEFAULT_SECRET_ENV, HttpDestination
from outbox.destinations.idempotency_key.destination import IdempotencyKeyHttpDestination
from outbox.destinations.in_process.destination import CONFIG_KEYS as IN_PROCESS_KEYS
from outbox.destinations.in_process.destination import InProcessDestination
from outbox.destinations.lease_rule import lease_refusal
from outbox.destinations.smtp.destination import SmtpDestination
from outbox.destinations.status_events_config import STATUS_EVENTS_KEY, status_events_problem
from outbox.destinations.webhook.destination import WebhookDestination
from outbox.destinations.webhook.pagerduty import PagerDutyEventsDestination
from outbox.destinations.work_status_config import WORK_STATUS_KEY, parse_work_status
from outbox.errors import OutboxError
from outbox.models import DestinationConfig

log = logging.getLogger(__name__)
_CONFIG_FIELD = DestinationConfig._meta.get_field("config")

KINDS: dict[str, type[Destination]] = {
    "http": HttpDestination,
    "idempotency_key_http": IdempotencyKeyHttpDestination,
    "in_process": InProcessDestination,
    "smtp": SmtpDestination,
    # The product's own (alert channels' rows, docs/incidents.md), refused in a destinations file.
    "webhook": WebhookDestination,
    "pagerduty_events": PagerDutyEventsDestination,
}


# Keys of any kind, read here and taken off before the kind reads its configuration.
_ANY_KINDS_KEYS = (STATUS_EVENTS_KEY, WORK_STATUS_KEY)


class DestinationUnavailable(OutboxError):
    """A destination that cannot be used: the message says which and why."""


class DestinationUnknown(DestinationUnavailable, LookupError):
    pass


class DestinationDisabled(DestinationUnavailable):
    pass


class DestinationInvalid(DestinationUnavailable, ValueError):
    """Its configuration cannot be built: unknown kind, unknown or invalid key, missing secret."""


def default_destination_name() -> str:
    """The default destination: where handoffs go when their step names none (the seed's name)."""
    return settings.HANDOFF_DESTINATION.get("name", "receiver")


def seed_config() -> dict:
    """settings.HANDOFF_DESTINATION as a whole configuration (kind, name and the kind's keys). The settings
    carry the http kind's keys; the in-process kind (the fast tests') takes only its own of them."""
    config = {"kind": "http", "name": "receiver", **settings.HANDOFF_DESTINATION}
    if config["kind"] == "in_process":
        config = {k: v for k, v in config.items() if k in IN_PROCESS_KEYS | {"kind"}}
    return config


def destination_from_config(config: dict) -> Destination:
    """A destination from a whole configuration; DestinationInvalid naming what is wrong."""
    kind = config.get("kind", "http")
    name = config.get("name", "")
    if kind not in KINDS:
        raise DestinationInvalid(
            f"destination {name!r}: unknown kind {kind!r} (known: {', '.join(sorted(KINDS))})"
        )
    for source in _named_secrets(config):
        if source.refused:
            raise DestinationInvalid(f"destination {name!r} ({kind}): {source.refused}")
    # The status-event secret is any kind's (status_events_config.py): checked here, not by the kind.
    if STATUS_EVENTS_KEY in config and (
        problem := status_events_problem(config[STATUS_EVENTS_KEY])
    ):
        raise DestinationInvalid(f"destination {name!r} ({kind}): {problem}")
    # How its work status is learnt is any kind's too (work_status_config.py).
    try:
        work_status = parse_work_status(
            config.get(WORK_STATUS_KEY), kind=kind, url=str(config.get("url", ""))
        )
    except ValueError as exc:
        raise DestinationInvalid(f"destination {name!r} ({kind}): {exc}") from exc
    try:
        destination = KINDS[kind].from_config(
            {k: v for k, v in config.items() if k not in ("kind", *_ANY_KINDS_KEYS)}
        )
    except (ValueError, TypeError, KeyError, ImproperlyConfigured) as exc:
        raise DestinationInvalid(f"destination {name!r} ({kind}): {exc}") from exc
    destination.work_status = work_status
    return destination


def row_config(row: DestinationConfig) -> dict:
    """A row as a whole configuration: its kind's keys, and its own name and kind."""
    return _whole_config(row.kind, row.name, row.config)


def _whole_config(kind: str, name: str, config: dict) -> dict:
    return {**config, "kind": kind, "name": name}


def _config_of(name: str, row: tuple | None) -> dict:
    """The destination's configuration as its row holds it now (`row`): read at each of a dispatcher's turns,
    so that a change is served by the next one."""
    kind, enabled, config = _row_from(row) or (None, None, None)
    if kind is None:
        if name == default_destination_name():
            return seed_config()
        raise DestinationUnknown(f"no destination named {name!r}")
    if not enabled:
        raise DestinationDisabled(f"destination {name!r} is disabled")
    return _whole_config(kind, name, config)


def destination_row_statement() -> str:
    """The read of a destination's row by name (its one parameter): kind, enabled, configuration as stored
    (`destination_from_row` reads them). A statement compiled once per process, its row read as a tuple: the ORM
    compiled the query at every dispatcher's turn (`outbox/dispatch/runner.py`), 0.35 ms of its CPU on
    PostgreSQL, more than the read."""
    return compiled_once(
        ("destination config",),
        lambda: str(
            DestinationConfig.objects.using(DB)
            .filter(name="%s")
            .values_list("kind", "enabled", "config")
            .query.sql_with_params()[0]
        ),
    )


def _row_of(name: str) -> tuple | None:
    with prepared_cursor() as cursor:
        cursor.execute(destination_row_statement(), [name])
        return cursor.fetchone()  # names are unique


def _row_from(found: tuple | None) -> tuple[str, bool, dict] | None:
    """The row's kind, whether it is enabled, and its configuration; None without a row."""
    if found is None or found[0] is None:
        return None
    kind, enabled, config = found
    return kind, bool(enabled), _CONFIG_FIELD.from_db_value(config, None, connections[DB])


@dataclass
class _Built:
    fingerprint: str
    destination: Destination


_built: dict[str, _Built] = {}
_built_lock = threading.Lock()


def destination_named(name: str) -> Destination:
    """The destination of that name, built from its row (the seed for the default name without one). Built
    once per process and rebuilt when its configuration changes; DestinationUnknown, DestinationDisabled or
    DestinationInvalid otherwise."""
    return destination_from_row(name, _row_of(name))


def destination_from_row(name: str, row: tuple | None) -> Destination:
    """`destination_named`, its row as `destination_row_statement` read it (None: no row): a dispatcher's turn
    reads it with the destination's limits in one statement (`outbox/dispatch/runner.py` `_turn_reads`)."""
    config = _config_of(name, row)
    fingerprint = json.dumps(config, sort_keys=True, default=str)
    with _built_lock:
        built = _built.get(name)
        if built is not None and built.fingerprint == fingerprint:
            return built.destination
        destination = destination_from_config(config)
        if built is not None:
            built.destination.close()
        _built[name] = _Built(fingerprint, destination)
        return destination


def enabled_destination_names() -> list[str]:
    """The destinations the dispatchers serve, by name: every enabled row, and the seed while no row of the
    default name exists. Compiled once (`rows_compiled_once`): a dispatcher's supervision reads them at every
    turn, and the ORM's compile cost it three times the read."""
    enabled = dict(
        rows_compiled_once(
            ("destination names",),
            lambda: DestinationConfig.objects.using(DB).values_list("name", "enabled"),
        )
    )
    names = {name for name, on in enabled.items() if on}
    if default_destination_name() not in enabled:
        names.add(default_destination_name())
    return sorted(names)


def enabled_destinations() -> list[Destination]:
    """Every enabled destination that can be built; one that cannot is logged and left out, so that it holds
    up none of the others (`destination_problems` names them; `manage.py dispatch` refuses to start)."""
    usable = []
    for name in enabled_destination_names():
        try:
            usable.append(destination_named(name))
        except DestinationUnavailable as exc:
            log.error("destination %s not served: %s", name, exc)
    return usable


def credentials_checked(destination: Destination) -> Destination:
    """The destination, or DestinationInvalid naming each secret it cannot find now
    (`credentials_missing()`)."""
    missing = destination.credentials_missing()
    if missing:
        raise DestinationInvalid(f"destination {destination.name!r}: {'; '.join(missing)}")
    return destination


def describe_contract(destination: Destination) -> str:
    """Where its handoffs go and its contract in words (idempotency, lookup, batch, credentials)."""
    return f"{destination.describe()}: {destination.describe_contract()}"


def destination_problems(names: list[str] | None = None) -> dict[str, str]:
    """Why each enabled destination (each of `names`, read by the caller) cannot be served (unknown kind,
    invalid configuration, a secret missing, a call that may outlive its lease: `lease_rule.py`); empty when
    every one can. By name."""
    problems = {}
    for name in enabled_destination_names() if names is None else names:
        try:
            destination = credentials_checked(destination_named(name))
        except DestinationUnavailable as exc:
            problems[name] = str(exc)
            continue
        if refusal := lease_refusal(destination):
            problems[name] = f"destination {name!r}: {refusal}"
    return problems


def get_destination() -> Destination:
    """The default destination (`default_destination_name`), for callers that serve no handoff of their own."""
    return destination_named(default_destination_name())


def reset_destination() -> None:
    """Forget every built destination (closing its connections): the next use builds it again."""
    with _built_lock:
        for built in _built.values():
            built.destination.close()
        _built.clear()


@dataclass(frozen=True)
class SecretSource:
    """Where a destination's secret comes from, and whether it is there now (never its value)."""

    where: str
    present: bool
    # A rotation's previous secret (`previous_*`): only there during a rotation, so its absence is normal.
    optional: bool = False
    # Why the destination may not read it there (secret_places.py), naming the key; "" when it may.
    refused: str = ""

    @property
    def state(self) -> str:
        if self.refused:
            return "REFUSED (not a place a destination may name)"
        if self.present:
            return "present"
        return "not set (used only during a rotation)" if self.optional else "MISSING"


def _non_empty(file: Path) -> bool:
    return file.is_file() and file.stat().st_size > 0


def _secret_at(path: tuple[str, ...], value: str) -> SecretSource:
    """The source one `*_env` or `*_file` key names; a refused place is never looked at."""
    if path[-1].endswith("_env"):
        refusal = env_refusal(value)
        present = not refusal and bool(os.environ.get(value))
        where = f"${value}"
    else:
        refusal = file_refusal(value)
        present = not refusal and _non_empty(secret_file(value))
        where = value
    return SecretSource(
        where,
        present,
        optional=path[-1].startswith("previous_"),
        refused=f"{json_path(path)}: {refusal}" if refusal else "",
    )


def _named_secrets(config: dict, path: tuple[str, ...] = ()) -> list[SecretSource]:
    sources = []
    for key, value in sorted(config.items()):
        if isinstance(value, dict):
            sources += _named_secrets(value, (*path, key))
        elif not isinstance(value, str):
            continue
        elif key.endswith("_env") or (key.endswith("_file") and not key.startswith("ca_")):
            sources.append(_secret_at((*path, key), value))
    return sources


def secret_sources(config: dict) -> list[SecretSource]:
    """The secrets a whole configuration names, at any depth: each `*_env` key an environment variable,
    each `*_file` key a file (a CA bundle's `ca_file` is no secret); the http kind without `secret_env`
    signs with settings.RECEIVER_SIGNING_SECRET."""
    sources = _named_secrets(config)
    if config.get("kind", "http") == "http" and not config.get("secret_env"):
        setting = f"settings.{DEFAULT_SECRET_ENV}"
        sources.insert(0, SecretSource(setting, bool(getattr(settings, DEFAULT_SECRET_ENV, ""))))
    return sources
