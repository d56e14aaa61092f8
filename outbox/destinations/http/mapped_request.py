"""The parts of a create call that a route's request mapping decides, besides its body: `{name}` path
parameters, the query, extra headers. The request was rendered at approval and frozen in the handoff
(lib/request_mapping.py, `Handoff.request`); here it is only placed, never rendered again. A kind that sends
mapped requests builds its create call through `MappedParts` (`idempotency_key_http`)."""

import re
from dataclasses import dataclass, field
from urllib.parse import quote, urlencode

from lib.json_config import json_path
from outbox.destinations.http.fields import header_name, header_value

PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True)
class MappedParts:
    """A frozen request's path parameters, query and headers, each header checked by HTTP's grammar."""

    path_values: dict[str, str] = field(default_factory=dict)
    query: dict[str, str] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, request: dict | None) -> "MappedParts":
        """The parts of `request` (none when the route maps none); ValueError naming a header that HTTP
        does not allow."""
        request = request or {}
        headers = request.get("headers") or {}
        for name, value in headers.items():
            where = json_path(("request", "headers", name))
            header_name(where, name)
            header_value(where, value)
        return cls(
            path_values=dict(request.get("path") or {}),
            query=dict(request.get("query") or {}),
            headers=dict(headers),
        )

    def path(self, template: str) -> str:
        """`template` with each `{name}` the request gives filled (percent-encoded) and its query added;
        other placeholders (`{key}`, placed by the key's placement) are left as they are."""
        path = PLACEHOLDER.sub(
            lambda m: (
                quote(str(self.path_values[m.group(1)]), safe="")
                if m.group(1) in self.path_values
                else m.group(0)
            ),
            template,
        )
        if self.query:
            path += ("&" if "?" in path else "?") + urlencode(self.query)
        return path


def path_parameters(template: str) -> set[str]:
    """The `{name}` placeholders of a configured path."""
    return set(PLACEHOLDER.findall(template))
