"""The eligibility rules of each workflow, with a version stored on every decision and handoff.

The rules in force are the newest stored `RuleVersion` of the workflow. A workflow with no stored
version runs under its built-in rules below (version 1 of every known workflow). Publishing new rules
(`approvals.services.rule_version_publish`) adds a version; decisions keep the version they stored.
"""

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache, lru_cache

import re2

from approvals.models import RuleVersion
from lib.control_characters import control_character_problem
from lib.request_mapping import mapping_problems
from outbox.models.destination_configs import DESTINATION_NAME, DESTINATION_NAME_RULE


@dataclass(frozen=True)
class RuleSet:
    workflow: str
    version: str
    schema: dict
    # The workflow's ordered steps, each {"name", "operation"?, "compensation"?, "destination"?}; none: a
    # single handoff under the instance key (to the default destination).
    steps: tuple = ()


ONBOARDING_V1 = RuleSet(
    workflow="onboarding",
    version="onboarding-v1",
    schema={
        "type": "object",
        "required": ["client_name", "contact_email", "plan"],
        "properties": {
            "client_name": {"type": "string", "minLength": 1, "maxLength": 200},
            "contact_email": {"type": "string", "minLength": 3, "maxLength": 254},
            "plan": {"type": "string", "enum": ["starter", "standard", "enterprise"]},
            "notes": {"type": "string", "maxLength": 2000},
        },
        "additionalProperties": True,
    },
)

# Version 1 of each workflow the product knows.
BUILT_IN_RULES = {ONBOARDING_V1.workflow: ONBOARDING_V1}


def known_workflows() -> set[str]:
    return set(BUILT_IN_RULES) | set(
        RuleVersion.objects.values_list("workflow", flat=True).distinct()
    )


def rules_for(workflow: str) -> RuleSet:
    """The rules in force for the workflow: its newest stored version, else its built-in rules."""
    stored = (
        RuleVersion.objects.filter(workflow=workflow)
        .order_by("-number")
        .values("version", "schema", "steps")
        .first()
    )
    if stored is not None:
        return RuleSet(
            workflow=workflow,
            version=stored["version"],
            schema=stored["schema"],
            steps=tuple(stored["steps"] or ()),
        )
    try:
        return BUILT_IN_RULES[workflow]
    except KeyError:
        raise LookupError(f"no rules for workflow {workflow!r}") from None


def searchable_fields(version: str) -> list[str]:
    """The top-level fields the schema of a rule version marks `"x-searchable": true`: the console's search
    finds a case by their values (besides its client name and e-mails, `outbox/search_text.py`)."""
    stored = RuleVersion.objects.filter(version=version).values_list("schema", flat=True).first()
    if stored is None:
        built_in = [r for r in BUILT_IN_RULES.values() if r.version == version]
        stored = built_in[0].schema if built_in else {}
    return schema_searchable_fields(stored)


def schema_searchable_fields(schema: object) -> list[str]:
    """The top-level fields `schema` marks `"x-searchable": true` (`searchable_fields`, for a schema in hand)."""
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(properties, dict):
        return []
    return sorted(
        name
        for name, rule in properties.items()
        if isinstance(rule, dict) and rule.get("x-searchable") is True
    )


def steps_of(version: str) -> tuple:
    """The steps of the rule version a decision was made under (the built-in versions have none)."""
    stored = RuleVersion.objects.filter(version=version).values_list("steps", flat=True).first()
    return tuple(stored or ())


# --- Regular expressions in rules ------------------------------------------------------------
# Rules are data that support staff publish and intake evaluates on every trigger. Python's `re`
# backtracks, so a pattern such as `(a+)+$` takes time exponential in the input's length. Patterns in
# rules are evaluated with RE2, whose time is linear in the input; a pattern RE2 cannot run (back-
# references, look-around) is refused when the rules are published.

_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False


@lru_cache(maxsize=256)
def _compiled(pattern: str):
    return re2.compile(pattern, _RE2_OPTIONS)


# jsonschema (about 0.05 s of CPU to import) is imported where a schema is checked, not with this module:
# every process of the product imports it through the services (a dispatcher, a receiver, each `manage.py`
# command a test starts), and only intake, decisions and publishing check one (docs/testing.md).
def _pattern(validator, pattern, instance, schema):
    from jsonschema import ValidationError

    if validator.is_type(instance, "string") and not _compiled(pattern).search(instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(validator, pattern_properties, instance, schema):
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in pattern_properties.items():
        for key, value in instance.items():
            if _compiled(pattern).search(key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _extra_keys(instance: dict, schema: dict) -> list:
    """The keys neither named in `properties` nor matched by a `patternProperties` pattern, sorted."""
    named = schema.get("properties", {})
    patterns = [_compiled(p) for p in schema.get("patternProperties", {})]
    return sorted(
        (k for k in instance if k not in named and not any(p.search(k) for p in patterns)), key=str
    )


def _extras_refused(extras: list):
    from jsonschema import ValidationError

    verb = "was" if len(extras) == 1 else "were"
    return ValidationError(
        f"Additional properties are not allowed ({', '.join(map(repr, extras))} {verb} unexpected)"
    )


def _additional_properties(validator, additional, instance, schema):
    if not validator.is_type(instance, "object"):
        return
    extras = _extra_keys(instance, schema)
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        yield _extras_refused(extras)


# --- Text fields: one line, or lines -----------------------------------------------------------------
# A string field of the rules holds lines of text (a text area on the forms) when it may be longer than
# this and is not an e-mail address; every other string field is one line, and refuses line breaks and
# control characters wherever the payload comes from (the forms, corrections, the intake API).
MULTILINE_OVER = 200


def text_is_multiline(name: str, spec: dict) -> bool:
    return "email" not in name and (spec.get("maxLength") or 0) > MULTILINE_OVER


def _properties(validator, properties, instance, schema):
    from jsonschema import Draft202012Validator, ValidationError

    yield from Draft202012Validator.VALIDATORS["properties"](
        validator, properties, instance, schema
    )
    if not validator.is_type(instance, "object"):
        return
    for name, spec in properties.items():
        value = instance.get(name)
        if not isinstance(value, str) or not isinstance(spec, dict):
            continue
        if problem := control_character_problem(value, multiline=text_is_multiline(name, spec)):
            yield ValidationError(problem, path=[name])


@cache
def _rules_validator():
    """Draft 2020-12 with RE2 patterns and one-line text fields: the validator class of every rule set."""
    import jsonschema

    return jsonschema.validators.extend(
        jsonschema.Draft202012Validator,
        {
            "pattern": _pattern,
            "patternProperties": _pattern_properties,
            "additionalProperties": _additional_properties,
            "properties": _properties,
        },
    )


def _schema_patterns(node: object) -> Iterator[str]:
    if isinstance(node, dict):
        if isinstance(node.get("pattern"), str):
            yield node["pattern"]
        if isinstance(node.get("patternProperties"), dict):
            yield from node["patternProperties"]
        for value in node.values():
            yield from _schema_patterns(value)
    elif isinstance(node, list):
        for value in node:
            yield from _schema_patterns(value)


def _has_keyword(node: object, keyword: str) -> bool:
    if isinstance(node, dict):
        return keyword in node or any(_has_keyword(v, keyword) for v in node.values())
    return isinstance(node, list) and any(_has_keyword(v, keyword) for v in node)


def pattern_problems(schema: dict) -> list[str]:
    """Why the regular expressions of `schema` cannot be published; empty when RE2 runs them all."""
    problems = []
    for pattern in _schema_patterns(schema):
        try:
            _compiled(pattern)
        except re2.error as exc:
            detail = (
                exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else str(exc)
            )
            problems.append(
                f"pattern {pattern!r} cannot be evaluated in linear time ({detail}); "
                "back-references and look-around are not supported"
            )
    if _has_keyword(schema, "patternProperties") and _has_keyword(schema, "unevaluatedProperties"):
        # jsonschema matches patternProperties with Python's `re` when it works out unevaluated properties.
        problems.append(
            "unevaluatedProperties cannot be combined with patternProperties; "
            "use additionalProperties"
        )
    return problems


def publish_problems(schema: object) -> list[str]:
    """Why `schema` cannot be published as rules; empty when it can."""
    if not isinstance(schema, dict):
        return ["the rules must be a JSON Schema object"]
    import jsonschema

    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        return [f"the rules are not a valid JSON Schema: {exc.message}"]
    return pattern_problems(schema)


def schema_problems(
    schema: dict, document: object, *, root: str = "payload", prefix: str = ""
) -> list[str]:
    """Every way `document` fails `schema`, each named by where it is (`root` for the document itself)."""
    validator = _rules_validator()(schema)
    problems = []
    for error in sorted(
        validator.iter_errors(document), key=lambda e: [str(p) for p in e.absolute_path]
    ):
        where = (
            prefix + ".".join(str(p) for p in error.absolute_path) if error.absolute_path else root
        )
        problems.append(f"{where}: {error.message}")
    return problems


def payload_problems(workflow: str, payload: object, rules: RuleSet | None = None) -> list[str]:
    """Every reason the payload fails the workflow's rules (current ones unless given); empty when it passes."""
    return schema_problems((rules or rules_for(workflow)).schema, payload)


# --- Steps of a workflow ---------------------------------------------------------------------------

STEP_NAME = re2.compile(r"[a-z][a-z0-9_]{0,39}")
MAX_STEPS = 10
# A step may name the destination it goes to (the default destination otherwise). Only its shape is checked
# here; whether it is a configured destination is checked when the version is published.
# A step marked "high_impact": true (money movement, ...) pages on its first failure (docs/incidents.md).
# A step whose compensation goes to a destination without an undo says "undo": "manual" (a person undoes it).
# A step may map the approved payload onto its destination's request: "request" (lib/request_mapping.py).
# A step may set business times, "not_before" and "finish_by", and an ordering key, "order_by"
# (approvals/step_constraints.py).
STEP_PARTS = {
    "name",
    "operation",
    "compensation",
    "destination",
    "high_impact",
    "undo",
    "request",
    "not_before",
    "finish_by",
    "order_by",
}


def _step_problems(index: int, step: object) -> list[str]:
    if not isinstance(step, dict) or not isinstance(step.get("name"), str):
        return [f"step {index + 1} must be an object with a name"]
    problems = []
    for part in ("name", "operation", "compensation"):
        value = step.get(part)
        if value not in (None, "") and not (isinstance(value, str) and STEP_NAME.fullmatch(value)):
            problems.append(
                f"step {index + 1} {part} must be lowercase letters, digits and _ (at most 40)"
            )
    problems += _destination_part_problems(index, step.get("destination"))
    if not isinstance(step.get("high_impact", False), bool):
        problems.append(f"step {index + 1} high_impact must be true or false")
    if step.get("undo", "manual") != "manual":
        problems.append(f'step {index + 1} undo must be "manual" (or absent)')
    if unknown := sorted(set(step) - STEP_PARTS):
        problems.append(f"step {index + 1} has unknown parts: {', '.join(unknown)}")
    return problems


def _destination_part_problems(index: int, destination: object) -> list[str]:
    if destination in (None, "") or (
        isinstance(destination, str) and DESTINATION_NAME.fullmatch(destination)
    ):
        return []
    return [f"step {index + 1} destination must be {DESTINATION_NAME_RULE}"]


def _request_shape_problems(steps: list) -> list[str]:
    """The steps' request mappings (`lib/request_mapping.py`): their shape, and expressions that compile."""
    mapped = [
        (i, s["request"]) for i, s in enumerate(steps) if isinstance(s, dict) and "request" in s
    ]
    return [
        p for i, mapping in mapped for p in mapping_problems(mapping, where=f"steps[{i}].request")
    ]


def steps_problems(steps: object) -> list[str]:
    """Why a list of steps cannot be published (empty list: fine)."""
    if not isinstance(steps, list) or len(steps) > MAX_STEPS:
        return [f"steps must be a list of at most {MAX_STEPS} steps"]
    problems = [p for index, step in enumerate(steps) for p in _step_problems(index, step)]
    problems += _request_shape_problems(steps)
    names = [step.get("name") for step in steps if isinstance(step, dict)]
    if len(names) != len(set(names)):
        problems.append("step names must be unique")
    return problems
