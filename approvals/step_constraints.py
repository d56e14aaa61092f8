"""A workflow step's business constraints as configured (issue 39): its ordering key, "order_by":
{"field": <a field of the schema>} (its destination receives the steps of one key in approval order), and its
times, `not_before` and `finish_by`, each {"field": <a field holding a time>} or {"after_approval": <seconds>}. Their
shape is checked with the steps; when both sides are known before any request exists (a time after the
approval), a retry window or an attention SLA that outlasts the time the deadline leaves is refused, the
field named: a retry could come due, or a person's time to act end, after the step may no longer go."""

from collections.abc import Iterable

from django.conf import settings

from outbox.destinations import DestinationUnavailable, destination_named
from outbox.destinations.registry import default_destination_name
from outbox.steps import TIMING_PARTS

# A payload field a time is read from: a string declared a time or a day (`lib.moments` reads both).
TIME_FORMATS = ("date-time", "date")


def timing_shape_problems(where: str, step: dict, schema: dict) -> list[str]:
    """`steps[i].not_before` / `.finish_by`: an object with a schema field, or seconds after the approval."""
    properties = (schema.get("properties") or {}) if isinstance(schema, dict) else {}
    problems = [
        _timing_rule_problem(f"{where}.{part}", step[part], properties)
        for part in TIMING_PARTS
        if step.get(part) is not None
    ]
    return [p for p in problems if p]


def _timing_rule_problem(place: str, rule: object, properties: dict) -> str:
    if not isinstance(rule, dict) or len(rule) != 1 or not set(rule) <= {"field", "after_approval"}:
        return f'{place}: {{"field": <a field holding a time>}} or {{"after_approval": <seconds>}}'
    if "field" in rule:
        return _time_field_problem(f"{place}.field", rule["field"], properties)
    seconds = rule.get("after_approval", 0)
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds < 0:
        return f"{place}.after_approval: a number of seconds, 0 or more"
    return ""


def _unknown_field_problem(place: str, name: object, fields: Iterable[str]) -> str:
    return f"{place}: {name!r} is no field of the schema (fields: {', '.join(sorted(fields))})"


def _time_field_problem(place: str, name: object, properties: dict) -> str:
    """A deadline read from the payload names a field of the schema that holds a time: otherwise the step
    would get no time at all from every request (a field that holds no time sets none)."""
    if not isinstance(name, str) or name not in properties:
        return _unknown_field_problem(place, name, properties)
    rule = properties[name] if isinstance(properties[name], dict) else {}
    if rule.get("type") != "string" or rule.get("format") not in TIME_FORMATS:
        return (
            f"{place}: {name!r} holds no time (its schema says type {rule.get('type')!r}, format "
            f'{rule.get("format")!r}): declare it {{"type": "string", "format": "date-time"}} or "date"'
        )
    return ""


def order_by_problems(where: str, step: dict, schema: dict) -> list[str]:
    """`steps[i].order_by`: {"field": <a field of the schema>}."""
    rule = step.get("order_by")
    if rule is None:
        return []
    fields = set((schema.get("properties") or {}) if isinstance(schema, dict) else {})
    if not isinstance(rule, dict) or set(rule) != {"field"}:
        return [f'{where}.order_by: {{"field": <the field whose value orders the steps>}}']
    if rule["field"] not in fields:
        return [_unknown_field_problem(f"{where}.order_by.field", rule["field"], fields)]
    return []


def constraint_problems(steps: list[dict], schema: dict) -> list[str]:
    """The steps' ordering keys and times by shape, then what outlasts a deadline known before any request
    (after the approval): the step's destination's retry window, the SLA of a handoff needing a person, and
    a not-before at or after the must-finish-by."""
    problems = [
        p
        for index, step in enumerate(steps)
        for p in timing_shape_problems(f"steps[{index}]", step, schema)
        + order_by_problems(f"steps[{index}]", step, schema)
    ]
    if problems:
        return problems
    return [p for index, step in enumerate(steps) for p in _outlasting(index, step)]


def _outlasting(index: int, step: dict) -> list[str]:
    """What outlasts the step's must-finish-by when it is a time after the approval."""
    finish = (step.get("finish_by") or {}).get("after_approval")
    if finish is None:
        return []
    start = (step.get("not_before") or {}).get("after_approval", 0)
    place, left = f"steps[{index}].finish_by.after_approval", finish - start
    if left <= 0:
        return [f"{place}: {finish} s is not after not_before ({start} s)"]
    problems = []
    window = _retry_window(step)
    if window is not None and window > left:
        problems.append(
            f"{place}: the retry window of destination {_destination(step)!r} ({window:g} s) "
            f"outlasts the {left:g} s this deadline leaves: shorten the window or move the deadline"
        )
    sla = 60.0 * settings.HANDOFF_SLA_MINUTES
    if sla > left:
        problems.append(
            f"{place}: the SLA of a handoff needing a person (HANDOFF_SLA_MINUTES, {sla:g} s) "
            f"outlasts the {left:g} s this deadline leaves"
        )
    return problems


def _destination(step: dict) -> str:
    return step.get("destination") or default_destination_name()


def _retry_window(step: dict) -> float | None:
    try:
        return destination_named(_destination(step)).retry_policy.window_seconds
    except DestinationUnavailable:
        return None  # not served: the destination check names it
