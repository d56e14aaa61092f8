"""How a destination's work status is learnt (the third owner's answer: is the work done?), configured as its
`work_status` object; any kind's, read here only (the registry takes the key off before the kind reads its
configuration, as `status_events`). docs/destinations.md "Work status".

- `{"source": "delivered"}`: the effect is the work (an e-mail sent): done when delivered, recorded with the
  delivery in the same transaction (`outbox/outcomes.py` `delivered_plan`). The smtp kind's default.
- `{"source": "pushed"}`: the receiver sends signed status events (`status_events`). Every other kind's default.
- `{"source": "pulled", "read": {"method": "GET", "path": "/v1/accounts/{receipt_id}"}, "field": "status",
  "done": ["active"], "failed": ["closed"], "open": ["pending"], "every_seconds": 60}`: read on a schedule
  (`outbox/services/work_pull.py`); a value in none of the lists is unknown, shown as it was answered.
"""

import re
from dataclasses import dataclass, field
from urllib.parse import quote

from outbox.destinations.http.fields import relative_path
from outbox.models.states import WORK_DONE, WORK_FAILED

WORK_STATUS_KEY = "work_status"
DELIVERED, PUSHED, PULLED = "delivered", "pushed", "pulled"
SOURCES = (DELIVERED, PUSHED, PULLED)
# Kinds whose default is "done when delivered": their effect is the work.
DELIVERED_BY_DEFAULT = frozenset({"smtp"})
# Kinds that can be asked over HTTP for a pulled read (`Destination.read_work`).
PULLABLE_KINDS = frozenset({"idempotency_key_http"})
WORK_OPEN = "open"
PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
PATH_NAMES = ("receipt_id", "action_key")
MIN_EVERY_SECONDS = 5
_KEYS = {DELIVERED: set(), PUSHED: set(), PULLED: {"read", "field", "done", "failed", "open"}}
_OPTIONAL = {PULLED: {"every_seconds"}}
DEFAULT_EVERY_SECONDS = 60


@dataclass(frozen=True)
class WorkRead:
    """The request that reads one task's work: a GET of a path under the destination's URL."""

    method: str
    path: str

    def path_for(self, *, receipt_id: str, action_key: str) -> str:
        values = {"receipt_id": receipt_id, "action_key": action_key}
        return PLACEHOLDER.sub(lambda m: quote(values[m.group(1)], safe=""), self.path)


@dataclass(frozen=True)
class WorkStatusSource:
    source: str = PUSHED
    read: WorkRead | None = None
    # Where the answer holds the status (a dotted path, such as "account.status").
    value_at: str = ""
    meanings: dict[str, str] = field(default_factory=dict)
    every_seconds: int = DEFAULT_EVERY_SECONDS

    @property
    def done_at_delivery(self) -> bool:
        return self.source == DELIVERED

    @property
    def pulled(self) -> bool:
        return self.source == PULLED

    def meaning(self, value: object) -> str:
        """done, failed or open for a configured value; "" for any other (unknown: never guessed)."""
        return self.meanings.get(value, "") if isinstance(value, str) else ""

    def describe(self) -> str:
        if self.source == DELIVERED:
            return "work done when delivered (the effect is the work)"
        if self.source == PUSHED:
            return "work status pushed by the receiver's status events"
        return (
            f"work status pulled every {self.every_seconds} s by {self.read.method} {self.read.path} "
            f"(field {self.value_at})"
        )


def default_work_status(kind: str) -> WorkStatusSource:
    return WorkStatusSource(DELIVERED if kind in DELIVERED_BY_DEFAULT else PUSHED)


def _where(*path: str) -> str:
    return ".".join((WORK_STATUS_KEY, *path))


def _read(value: object, url: str) -> WorkRead:
    if not isinstance(value, dict) or set(value) - {"method", "path"} or "path" not in value:
        raise ValueError(
            f"{_where('read')}: must be an object with path (and method GET), such as "
            '{"method": "GET", "path": "/v1/accounts/{receipt_id}"}'
        )
    method = value.get("method", "GET")
    if method != "GET":
        raise ValueError(f"{_where('read', 'method')}: must be GET, not {method!r}")
    path = value["path"]
    if not isinstance(path, str):
        raise ValueError(f"{_where('read', 'path')}: must be a path under url, not {path!r}")
    relative_path(_where("read", "path"), path, url)
    for name in PLACEHOLDER.findall(path):
        if name not in PATH_NAMES:
            raise ValueError(
                f"{_where('read', 'path')}: unknown placeholder {{{name}}} "
                "(allowed: {receipt_id}, {action_key})"
            )
    return WorkRead(method, path)


def _values(config: dict, name: str) -> list[str]:
    values = config[name]
    if not isinstance(values, list) or not all(isinstance(v, str) and v for v in values):
        raise ValueError(f"{_where(name)}: must be a list of the values that mean {name}")
    return values


def _meanings(config: dict) -> dict[str, str]:
    meanings: dict[str, str] = {}
    for name, meaning in (("done", WORK_DONE), ("failed", WORK_FAILED), ("open", WORK_OPEN)):
        for value in _values(config, name):
            if value in meanings:
                raise ValueError(f"{_where(name)}: {value!r} is also listed as {meanings[value]}")
            meanings[value] = meaning
    if WORK_DONE not in meanings.values():
        raise ValueError(f"{_where('done')}: name at least one value that means the work is done")
    return meanings


def _every_seconds(config: dict) -> int:
    every = config.get("every_seconds", DEFAULT_EVERY_SECONDS)
    if isinstance(every, bool) or not isinstance(every, int) or every < MIN_EVERY_SECONDS:
        raise ValueError(
            f"{_where('every_seconds')}: must be a whole number of seconds, at least "
            f"{MIN_EVERY_SECONDS}, not {every!r}"
        )
    return every


def parse_work_status(value: object, *, kind: str, url: str = "") -> WorkStatusSource:
    """The checked `work_status` object of a destination of `kind` (its default when absent); ValueError
    naming the field that is wrong (`work_status.read.path: …`)."""
    if value is None:
        return default_work_status(kind)
    if not isinstance(value, dict):
        raise ValueError(f'{WORK_STATUS_KEY}: must be an object such as {{"source": "pushed"}}')
    source = value.get("source")
    if source not in SOURCES:
        raise ValueError(f"{_where('source')}: must be one of {', '.join(SOURCES)}, not {source!r}")
    unknown = sorted(set(value) - {"source"} - _KEYS[source] - _OPTIONAL.get(source, set()))
    if unknown:
        raise ValueError(f"{_where(unknown[0])}: not a key of a {source} work status")
    if source != PULLED:
        return WorkStatusSource(source)
    if kind not in PULLABLE_KINDS:
        raise ValueError(
            f"{_where('source')}: a {kind} destination cannot be asked for its work "
            f"(pulled needs one of: {', '.join(sorted(PULLABLE_KINDS))})"
        )
    missing = sorted(_KEYS[PULLED] - set(value))
    if missing:
        raise ValueError(f"{_where(missing[0])}: required when the work status is pulled")
    if not isinstance(value["field"], str) or not value["field"]:
        raise ValueError(f"{_where('field')}: must be the dotted path of the status in the answer")
    return WorkStatusSource(
        PULLED,
        read=_read(value["read"], url),
        value_at=value["field"],
        meanings=_meanings(value),
        every_seconds=_every_seconds(value),
    )
