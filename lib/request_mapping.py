"""Request mapping: how an approved payload becomes one destination's request (body, path, query, headers).

A mapping is `{"body": <template>, "path": {name: <template>}, "query": {...}, "headers": {...}}`, each part
optional. A template is any JSON in which an object `{"$": "<JMESPath expression>"}` (optionally with a
`"default"`) is replaced by the expression's value over the payload; everything else is literal. The body
renders to any JSON (the payload itself when the mapping has no body); path, query and header values to
texts (a number is written as text). A refusal names its place (`steps[1].request.body.name: client_name
is missing`). Why JMESPath (and not a text template): docs/destinations.md, "Request mapping".

An e-mail mapping (for an `smtp` route) is `{"subject", "text", "to"}`, all three: each a `${field}` text
template (`string.Template`, the smtp kind's own syntax) or an expression object; it renders to those three
texts, a line break in the subject or the address refused (it would start another header).
"""

import hashlib
import json
import string
from functools import lru_cache

import jmespath
from jmespath.exceptions import JMESPathError

PARTS = ("body", "path", "query", "headers")
EMAIL_PARTS = ("subject", "text", "to")
# The e-mail parts written into a header: a CR or LF in them would start a header of the payload's choosing.
EMAIL_HEADER_PARTS = ("subject", "to")
EXPRESSION = "$"
DEFAULT = "default"
MAX_EXPRESSION = 500


class MappingRefused(ValueError):
    """A mapping that cannot be used, or cannot render over a payload; the message names the place."""


@lru_cache(maxsize=512)
def _compiled(expression: str):
    return jmespath.compile(expression)


def _is_expression(node: object) -> bool:
    return isinstance(node, dict) and EXPRESSION in node


def _expression_problem(where: str, node: dict) -> str:
    if set(node) - {EXPRESSION, DEFAULT}:
        extra = ", ".join(sorted(set(node) - {EXPRESSION, DEFAULT}))
        return f'{where}: an expression object holds "$" and optionally "default", not {extra}'
    expression = node[EXPRESSION]
    if not isinstance(expression, str) or not expression.strip():
        return f'{where}: "$" must be a JMESPath expression (a non-empty text)'
    if len(expression) > MAX_EXPRESSION:
        return f"{where}: the expression is longer than {MAX_EXPRESSION} characters"
    try:
        _compiled(expression)
    except JMESPathError as exc:
        return f"{where}: {expression!r} is not a JMESPath expression ({_first_line(exc)})"
    return ""


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _template_problems(where: str, node: object) -> list[str]:
    if _is_expression(node):
        problem = _expression_problem(where, node)
        return [problem] if problem else []
    if isinstance(node, dict):
        return [
            p for key, value in node.items() for p in _template_problems(f"{where}.{key}", value)
        ]
    if isinstance(node, list):
        return [
            p for i, value in enumerate(node) for p in _template_problems(f"{where}[{i}]", value)
        ]
    return []


def _named_values_problems(where: str, values: object) -> list[str]:
    """Path parameters, query or headers: names to texts, numbers or expressions."""
    if not isinstance(values, dict) or not all(isinstance(k, str) and k for k in values):
        return [f"{where}: an object of names to values or expressions"]
    problems = []
    for name, value in values.items():
        if isinstance(value, dict | list) and not _is_expression(value):
            problems.append(f"{where}.{name}: a text, a number or an expression")
        else:
            problems += _template_problems(f"{where}.{name}", value)
    return problems


def is_email_mapping(mapping: object) -> bool:
    """An e-mail mapping names an e-mail part (subject, text, to); any other maps an HTTP request."""
    return isinstance(mapping, dict) and any(part in mapping for part in EMAIL_PARTS)


def _text_template(where: str, text: str) -> string.Template:
    template = string.Template(text)
    if not template.is_valid():
        raise MappingRefused(f"{where}: not a valid text template ($field or ${{field}}; $$ for $)")
    return template


def _email_part_problems(place: str, value: object) -> list[str]:
    if _is_expression(value):
        return _template_problems(place, value)
    if not isinstance(value, str) or not value.strip():
        return [f"{place}: a text template (${{field}}) or an expression"]
    try:
        _text_template(place, value)
    except MappingRefused as exc:
        return [str(exc)]
    return []


def _email_mapping_problems(mapping: dict, *, where: str) -> list[str]:
    problems = []
    if others := sorted(set(mapping) - set(EMAIL_PARTS)):
        problems.append(
            f"{where}: an e-mail mapping holds subject, text and to, not {', '.join(others)}"
        )
    if missing := [part for part in EMAIL_PARTS if part not in mapping]:
        problems.append(
            f"{where}: an e-mail mapping needs subject, text and to (missing {', '.join(missing)})"
        )
    return problems + [
        p
        for part in EMAIL_PARTS
        if part in mapping
        for p in _email_part_problems(f"{where}.{part}", mapping[part])
    ]


def text_template_fields(mapping: object, *, where: str) -> list[tuple[str, str]]:
    """The payload fields an e-mail mapping's text templates name, each with its place: (place, field)."""
    if not is_email_mapping(mapping):
        return []
    return [
        (f"{where}.{part}", name)
        for part in EMAIL_PARTS
        if isinstance(mapping.get(part), str)
        for name in string.Template(mapping[part]).get_identifiers()
    ]


def mapping_problems(mapping: object, *, where: str) -> list[str]:
    """Why `mapping` cannot be used (its shape, expressions that do not compile), each naming its place."""
    if not isinstance(mapping, dict):
        return [f"{where}: a request mapping is an object of {', '.join(PARTS)}"]
    if is_email_mapping(mapping):
        return _email_mapping_problems(mapping, where=where)
    problems = []
    if unknown := sorted(set(mapping) - set(PARTS)):
        problems.append(f"{where}: unknown parts {', '.join(unknown)} (known: {', '.join(PARTS)})")
    for part in ("path", "query", "headers"):
        problems += _named_values_problems(f"{where}.{part}", mapping.get(part, {}))
    if "body" in mapping:
        problems += _template_problems(f"{where}.body", mapping["body"])
    return problems


def _value(where: str, node: dict, payload: object) -> object:
    expression = node[EXPRESSION]
    try:
        value = _compiled(expression).search(payload)
    except JMESPathError as exc:
        raise MappingRefused(
            f"{where}: {expression} cannot be evaluated ({_first_line(exc)})"
        ) from exc
    if value is None:
        if DEFAULT in node:
            return node[DEFAULT]
        raise MappingRefused(f"{where}: {expression} is missing")
    return value


def render_template(template: object, payload: object, *, where: str) -> object:
    """The template with each expression object replaced by its value over `payload`."""
    if _is_expression(template):
        return _value(where, template, payload)
    if isinstance(template, dict):
        return {
            key: render_template(value, payload, where=f"{where}.{key}")
            for key, value in template.items()
        }
    if isinstance(template, list):
        return [
            render_template(value, payload, where=f"{where}[{i}]")
            for i, value in enumerate(template)
        ]
    return template


def _scalar_text(where: str, value: object) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        kind = type(value).__name__ if value is not None else "null"
        raise MappingRefused(f"{where}: must render to a text or a number, not {kind}")
    return value if isinstance(value, str) else json.dumps(value)


def _filled(where: str, text: str, payload: object) -> str:
    values = {}
    for name in _text_template(where, text).get_identifiers():
        value = payload.get(name) if isinstance(payload, dict) else None
        if value is None:
            raise MappingRefused(f"{where}: ${{{name}}} is missing")
        if isinstance(value, dict | list):
            raise MappingRefused(f"{where}: ${{{name}}} is not a text")
        values[name] = value if isinstance(value, str) else json.dumps(value)
    return string.Template(text).substitute(values)


def _email_part(where: str, template: object, payload: object) -> str:
    if isinstance(template, str):
        return _filled(where, template, payload)
    return _scalar_text(where, render_template(template, payload, where=where))


def render_email(mapping: dict, payload: object, *, where: str) -> dict:
    """The e-mail an e-mail mapping makes of `payload`: {"subject", "text", "to"}; MappingRefused naming the
    part that cannot render or holds a line break where a header would carry it. (An address that is not
    one is refused when sent, as an unmapped route's: permanent, never retried.)"""
    rendered = {
        part: _email_part(f"{where}.{part}", mapping[part], payload) for part in EMAIL_PARTS
    }
    for part in EMAIL_HEADER_PARTS:
        if "\r" in rendered[part] or "\n" in rendered[part]:
            raise MappingRefused(
                f"{where}.{part}: renders with a line break (CR or LF), which would start another "
                "header of the payload's making"
            )
    return rendered


def render_request(mapping: dict, payload: object, *, where: str) -> dict:
    """The request the mapping makes of `payload`: {"body", "path", "query", "headers"} (the body is the
    payload itself when the mapping has none), or an e-mail mapping's {"subject", "text", "to"};
    MappingRefused naming the place that cannot render."""
    if problems := mapping_problems(mapping, where=where):
        raise MappingRefused(problems[0])
    if is_email_mapping(mapping):
        return render_email(mapping, payload, where=where)
    rendered = {
        "body": render_template(mapping["body"], payload, where=f"{where}.body")
        if "body" in mapping
        else payload
    }
    for part in ("path", "query", "headers"):
        rendered[part] = {
            name: _scalar_text(
                f"{where}.{part}.{name}",
                render_template(value, payload, where=f"{where}.{part}.{name}"),
            )
            for name, value in mapping.get(part, {}).items()
        }
    return rendered


def sent_body(request: dict | None, payload: dict) -> dict:
    """The JSON body a frozen request sends: its body, else the payload (an unmapped route's, and an e-mail
    request's, whose text is its message)."""
    return request["body"] if request is not None and "body" in request else payload


def requests_hash(requests: object) -> str:
    """The hash of rendered requests, over their canonical JSON (sorted keys, no spaces): what a decision
    binds to."""
    canonical = json.dumps(requests, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _required_sample(schema: object) -> object:
    """A value the schema accepts, holding only its required properties (recursively)."""
    if not isinstance(schema, dict):
        return "x"
    if "const" in schema or schema.get("enum"):
        return schema["const"] if "const" in schema else _first(schema["enum"])
    kind = _kind(schema)
    if kind == "object":
        return _object_sample(schema)
    if kind == "array":
        return [_required_sample(schema.get("items", {}))] * (schema.get("minItems") or 0)
    return _scalar_sample(kind, schema)


def _kind(schema: dict) -> object:
    """The schema's type (the first of several); "object" for an untyped schema with properties."""
    kind = schema.get("type")
    kind = kind[0] if isinstance(kind, list) and kind else kind
    return "object" if kind is None and "properties" in schema else kind


def _first(values: object) -> object:
    return values[0] if isinstance(values, list) else "x"


def _object_sample(schema: dict) -> dict:
    properties = schema.get("properties") or {}
    return {
        name: _required_sample(properties.get(name, {}))
        for name in schema.get("required") or []
        if isinstance(name, str)
    }


def _scalar_sample(kind: object, schema: dict) -> object:
    if kind in ("integer", "number"):
        return schema.get("minimum", 1)
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    if schema.get("format") == "email":
        return "someone@example.com"
    return "x" * max(int(schema.get("minLength") or 1), 1)


def schema_sample(schema: dict) -> object:
    """A sample payload built from a JSON Schema: its required properties only, so that a mapping which
    renders over it renders over every payload the schema accepts (short of types it cannot foresee)."""
    return _required_sample(schema)
