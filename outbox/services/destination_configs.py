"""Destinations under version control: a file of destinations applied as rows (`manage.py destinations
apply FILE`), all or nothing, each change audited as a destination event that says what changed (never a
secret's value: the configuration holds none, only where each secret comes from)."""

import os
import re
from dataclasses import dataclass

from django.conf import settings
from django.core import checks
from django.db import transaction
from django.utils.module_loading import import_string

from lib.databases import DB
from outbox.destinations.contract_checks import contract_refusals
from outbox.destinations.lease_rule import lease_refusal
from outbox.destinations.registry import (
    KINDS,
    DestinationInvalid,
    credentials_checked,
    default_destination_name,
    destination_from_config,
)
from outbox.errors import OutboxError
from outbox.models import DestinationConfig, DestinationEvent
from outbox.models.destination_configs import DESTINATION_NAME, DESTINATION_NAME_RULE

# The parts of an entry that are the row's own; every other key is the kind's configuration.
ROW_KEYS = {"name", "kind", "enabled"}
# Values shown in a change's summary, except under a name that looks like a secret's (no kind takes one,
# but a summary is no place to find out).
_SECRET_LOOKING = re.compile(r"secret|token|password", re.IGNORECASE)
_WHERE_A_SECRET_IS = ("_env", "_file")


class DestinationsRefused(OutboxError):
    """The file cannot be applied; nothing was written. `problems` names each."""

    def __init__(self, problems: list[str]):
        super().__init__("; ".join(problems))
        self.problems = problems


@dataclass(frozen=True)
class DestinationChange:
    name: str
    summary: str


def _entry_problems(index: int, entry: object, seen: set[str]) -> list[str]:
    if not isinstance(entry, dict):
        return [f"destination {index + 1} must be an object"]
    name = entry.get("name")
    if not isinstance(name, str) or not DESTINATION_NAME.fullmatch(name):
        return [f"destination {index + 1}: name must be {DESTINATION_NAME_RULE}"]
    if name in seen:
        return [f"destination {name!r} appears twice"]
    seen.add(name)
    if not isinstance(entry.get("enabled", True), bool):
        return [f"destination {name!r}: enabled must be true or false"]
    if not isinstance(entry.get("kind"), str):
        return [f"destination {name!r}: kind is required"]
    if getattr(KINDS.get(entry["kind"]), "product_only", False):
        return [
            f"destinations[{index}].kind: {entry['kind']!r} is the product's own (an alert channel's, "
            "written from its row: docs/incidents.md), not a destinations file's"
        ]
    return _build_problems(index, name, entry)


def _build_problems(index: int, name: str, entry: dict) -> list[str]:
    """The entry built as its kind would build it, its secrets present, one call within a lease."""
    try:
        destination = destination_from_config({k: v for k, v in entry.items() if k != "enabled"})
        try:
            credentials_checked(destination)
            refusal = lease_refusal(destination)
            # A contract that builds but cannot work: contradicting overrides, paths its samples lack.
            refusals = ([refusal] if refusal else []) + contract_refusals(destination)
        finally:
            destination.close()
    except DestinationInvalid as exc:
        return [f"destinations[{index}]: {exc}"]
    return [f"destinations[{index}] ({name}).{refusal}" for refusal in refusals]


def destination_entries_problems(document: object) -> list[str]:
    """Why a destinations file cannot be applied (each entry built as its kind would: unknown kind, unknown
    or invalid key, missing secret, timeouts a call may outlive its lease with: `lease_rule.py`, a contract
    that cannot work: `contract_checks.py`); empty when it can."""
    if not isinstance(document, dict) or set(document) != {"destinations"}:
        return ['the file must be {"destinations": [...]}']
    if not isinstance(document["destinations"], list):
        return ["destinations must be a list"]
    seen: set[str] = set()
    return [
        problem
        for index, entry in enumerate(document["destinations"])
        for problem in _entry_problems(index, entry, seen)
    ]


def _shown(key: str, value: object) -> str:
    if _SECRET_LOOKING.search(key) and not key.endswith(_WHERE_A_SECRET_IS):
        return "(not shown)"
    return repr(value)


def _created(kind: str, enabled: bool, config: dict) -> str:
    keys = "".join(f"; {k}={_shown(k, v)}" for k, v in sorted(config.items()))
    return f"created: kind {kind}, {'enabled' if enabled else 'disabled'}{keys}"


def _key_change(key: str, was: dict, now: dict) -> str:
    if key not in now:
        return f"{key} removed"
    if key not in was:
        return f"{key}={_shown(key, now[key])} added"
    if was[key] != now[key]:
        return f"{key} {_shown(key, was[key])} -> {_shown(key, now[key])}"
    return ""


def _summary(row: DestinationConfig | None, kind: str, enabled: bool, config: dict) -> str:
    """What applying the entry changes, in words; "" when nothing."""
    if row is None:
        return _created(kind, enabled, config)
    changes = [f"kind {row.kind} -> {kind}"] if row.kind != kind else []
    if row.enabled != enabled:
        changes.append("enabled" if enabled else "disabled")
    changes += [
        _key_change(key, row.config, config) for key in sorted(set(row.config) | set(config))
    ]
    return "; ".join(change for change in changes if change)


def _still_routed_problems(document: dict) -> list[str]:
    """The entries that disable a destination the workflows in force still route steps to: its handoffs
    would wait forever, saying "queued", while nobody serves it."""
    disabled = [
        (index, entry["name"])
        for index, entry in enumerate(document["destinations"])
        if entry.get("enabled", True) is False
    ]
    if not disabled:
        return []
    routes = import_string(settings.HANDOFF_ROUTES_CHECK)(default_destination_name())
    return [
        f"destinations[{index}] ({name}).enabled: false, but steps in force route to it "
        f"({', '.join(routes[name])}); route them elsewhere first (manage.py workflows apply)"
        for index, name in disabled
        if routes.get(name)
    ]


def destination_configs_apply(*, document: object, actor_label: str) -> list[DestinationChange]:
    """Create or update a row per entry of the file (rows it does not name are left as they are), each
    change audited; DestinationsRefused with every problem, and nothing written, when any entry is wrong
    or disables a destination that steps in force still route to."""
    if problems := destination_entries_problems(document) or _still_routed_problems(document):
        raise DestinationsRefused(problems)
    changes = []
    with transaction.atomic(using=DB):
        for entry in document["destinations"]:
            name, kind, enabled = entry["name"], entry["kind"], entry.get("enabled", True)
            config = {k: v for k, v in entry.items() if k not in ROW_KEYS}
            if summary := _row_write(name, kind, enabled, config, actor_label):
                changes.append(DestinationChange(name, summary))
    return changes


def _row_write(name: str, kind: str, enabled: bool, config: dict, actor_label: str) -> str:
    """Inside the caller's transaction: the row written when it differs, the change audited; what changed
    in words, "" when nothing."""
    row = (
        DestinationConfig.objects.using(DB).select_for_update(no_key=True).filter(name=name).first()
    )
    if not (summary := _summary(row, kind, enabled, config)):
        return ""
    DestinationConfig.objects.using(DB).update_or_create(
        name=name, defaults={"kind": kind, "enabled": enabled, "config": config}
    )
    DestinationEvent.objects.using(DB).create(
        destination=name,
        from_state="",
        to_state="",
        actor_label=actor_label,
        action="configure",
        reason=summary,
    )
    return summary


def destination_config_put(
    *, name: str, kind: str, config: dict, enabled: bool, actor_label: str
) -> bool:
    """Write one destination row of a product-only kind (an alert channel's, `outbox/destinations/webhook/`,
    or the smtp kind for an e-mail channel) when it differs, audited like a file's change; True when it
    changed. DestinationInvalid when it cannot be built (nothing written)."""
    row = DestinationConfig.objects.using(DB).filter(name=name).first()
    if not _summary(row, kind, enabled, config):
        return False  # the usual case, at every notification: no lock, nothing built
    destination_from_config({**config, "kind": kind, "name": name}).close()
    with transaction.atomic(using=DB):
        return bool(_row_write(name, kind, enabled, config, actor_label))


def _mail_auth() -> dict:
    """SMTP AUTH from the environment (EMAIL_HOST_USER, EMAIL_HOST_PASSWORD), never copied into the row: the
    smtp kind's `mail_settings_auth` reads both at send time, for EMAIL_HOST:EMAIL_PORT only."""
    if not os.environ.get("EMAIL_HOST_USER"):
        return {}
    if not os.environ.get("EMAIL_HOST_PASSWORD"):
        raise DestinationInvalid(
            "EMAIL_HOST_PASSWORD: not set in the environment, EMAIL_HOST_USER is"
        )
    if not (settings.EMAIL_USE_TLS or settings.EMAIL_USE_SSL):
        raise DestinationInvalid(
            "EMAIL_HOST_USER: SMTP AUTH needs EMAIL_USE_TLS or EMAIL_USE_SSL (no password in clear)"
        )
    return {"mail_settings_auth": True}


@checks.register(checks.Tags.compatibility)
def mail_auth_check(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    """The product's mail server's AUTH refused at start, the variable named, not at the first e-mail."""
    try:
        _mail_auth()
    except DestinationInvalid as exc:
        return [checks.Error(str(exc), hint="docs/incidents.md, Channels", id="outbox.E002")]
    return []


def product_mail_config() -> dict:
    """The smtp kind's configuration for the product's own e-mail (an e-mail alert channel's, the approval
    notices'): Django's mail settings, SMTP AUTH from the environment, the message's recipient, subject and
    body from the payload."""
    return {
        **_mail_auth(),
        **({"ca_file": settings.EMAIL_CA_FILE} if settings.EMAIL_CA_FILE else {}),
        "host": settings.EMAIL_HOST,
        "port": settings.EMAIL_PORT,
        # Django's EMAIL_USE_SSL (TLS from the start) or EMAIL_USE_TLS (STARTTLS), as the smtp kind says it.
        "security": (
            "tls" if settings.EMAIL_USE_SSL else "starttls" if settings.EMAIL_USE_TLS else "none"
        ),
        "from_address": settings.ALERT_FROM_EMAIL,
        "to": "to",
        "subject": "$subject",
        "body": "$body",
        "message_id_domain": "handoff-console",
    }
