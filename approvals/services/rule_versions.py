"""Rule versions: publishing the rules a workflow's payloads must follow (and its steps)."""

from django.db import transaction

from approvals.errors import ApprovalDenied, InvalidPayload
from approvals.models import RuleVersion
from approvals.route_requests import mapping_problems_over
from approvals.rules import BUILT_IN_RULES, publish_problems, steps_problems
from approvals.step_constraints import constraint_problems
from lib.databases import DB
from lib.request_mapping import is_email_mapping, schema_sample, text_template_fields
from outbox.destinations import DestinationUnavailable, destination_named
from outbox.destinations.http.fields import header_name
from outbox.destinations.http.mapped_request import path_parameters
from outbox.destinations.idempotency_key.config import OWN_HEADERS
from outbox.destinations.idempotency_key.destination import IdempotencyKeyHttpDestination
from outbox.destinations.registry import default_destination_name, enabled_destination_names
from outbox.destinations.smtp.destination import SmtpDestination
from outbox.models.handoffs import RESERVED_WORKFLOWS


def rule_version_publish(
    *, workflow: str, schema: dict, actor, notes: str = "", steps: list[dict] | None = None
) -> RuleVersion:
    """New rules for a workflow: a new version, in force from now on. Earlier decisions keep theirs.
    `steps` make it a workflow of several steps, each its own handoff (see outbox/steps.py). `actor` None is
    a management command acting for whoever runs the deployment (the demo); people need the permission."""
    if actor is not None and not actor.has_perm("approvals.add_ruleversion"):
        raise ApprovalDenied(f"{actor} may not publish rules")
    if problems := reserved_name_problems(workflow) or rule_version_problems(
        schema=schema, steps=steps or []
    ):
        raise InvalidPayload(problems)
    with transaction.atomic(using=DB):
        latest = (
            RuleVersion.objects.select_for_update(no_key=True)
            .filter(workflow=workflow)
            .order_by("-number")
            .first()
        )
        if latest is None and workflow in BUILT_IN_RULES:
            # The built-in rules are version 1; store them so that their number is never reused.
            built_in = BUILT_IN_RULES[workflow]
            latest = RuleVersion.objects.create(
                workflow=workflow,
                number=1,
                version=built_in.version,
                schema=built_in.schema,
                notes="built-in rules",
            )
        number = latest.number + 1 if latest else 1
        return RuleVersion.objects.create(
            workflow=workflow,
            number=number,
            version=f"{workflow}-v{number}",
            schema=schema,
            steps=steps or [],
            notes=notes,
            created_by=actor,
        )


def reserved_name_problems(workflow: str) -> list[str]:
    """A workflow may not take a name the product's own handoffs use: the alert notifications' workflow
    (`NOTIFICATION_WORKFLOW`) and `incident`, whose action keys would begin `incident:` like theirs. Either
    would mix a business workflow's handoffs with the notifications, which every count leaves out."""
    if workflow in RESERVED_WORKFLOWS:
        return [
            f"workflow name {workflow!r} is reserved for the product's alert notifications; "
            "choose another name"
        ]
    return []


def rule_version_problems(*, schema: dict, steps: list[dict]) -> list[str]:
    """Why the rules cannot be published: the schema, the steps' shape, then their destinations."""
    return (
        publish_problems(schema) + steps_problems(steps)
        or _destination_problems(steps)
        or _undo_problems(steps)
        or _request_problems(schema, steps)
        or constraint_problems(steps, schema)
    )


def _request_problems(schema: dict, steps: list[dict]) -> list[str]:
    """The steps whose request mapping cannot be sent where they go (a kind that sends no mapped request,
    a path parameter its create path lacks, a header the destination sets itself), or cannot render over a
    sample of the schema (its required fields only): a missing field, a wrong type, named by its place."""
    problems = []
    for index, step in enumerate(steps):
        if step.get("request") is not None:
            problems += _route_problems(f"steps[{index}].request", step, schema)
    return problems or mapping_problems_over(schema_sample(schema), steps)


def _route_problems(where: str, step: dict, schema: dict) -> list[str]:
    name = step.get("destination") or default_destination_name()
    try:
        destination = destination_named(name)
    except DestinationUnavailable:
        return []  # not served: `_destination_problems` names it
    mapping = step["request"]
    if isinstance(destination, SmtpDestination):
        return _email_route_problems(where, name, mapping, schema)
    if not isinstance(destination, IdempotencyKeyHttpDestination):
        return [
            f"{where}: destination {name!r} sends the approved payload as it is; a request mapping "
            "needs an idempotency_key_http or smtp destination"
        ]
    if is_email_mapping(mapping):
        return [
            f"{where}: destination {name!r} sends HTTP requests; subject, text and to are e-mail's"
        ]
    return _http_route_problems(where, name, destination, mapping)


def _email_route_problems(where: str, name: str, mapping: object, schema: dict) -> list[str]:
    """An smtp route maps subject, text and to; each `${field}` its text templates name is the schema's."""
    if not is_email_mapping(mapping):
        return [
            f"{where}: destination {name!r} sends e-mail; its mapping holds subject, text and to"
        ]
    fields = set((schema.get("properties") or {}) if isinstance(schema, dict) else {})
    return [
        f"{place}: ${{{field}}} names no field of the schema (fields: {', '.join(sorted(fields))})"
        for place, field in text_template_fields(mapping, where=where)
        if field not in fields
    ]


def _http_route_problems(
    where: str, name: str, destination: IdempotencyKeyHttpDestination, mapping: dict
) -> list[str]:
    given = set(mapping.get("path", {}))
    wanted = path_parameters(destination.config.create.path) - {"key"}
    problems = [
        f"{where}.path.{p}: create.path of {name!r} has no {{{p}}}" for p in sorted(given - wanted)
    ]
    problems += [
        f"{where}.path: no value for {{{p}}} of create.path of {name!r}"
        for p in sorted(wanted - given)
    ]
    for header in mapping.get("headers", {}):
        try:
            header_name(f"{where}.headers.{header}", header)
        except ValueError as exc:
            problems.append(str(exc))
        if header.lower() in OWN_HEADERS:
            problems.append(f"{where}.headers.{header}: set by the destination itself")
    return problems


def _undo_problems(steps: list[dict]) -> list[str]:
    """The steps that declare a compensation at a destination that cannot undo (no undo request, no undo of
    its kind) without saying "undo": "manual": their compensation would leave a person a residual unannounced."""
    problems = []
    for index, step in enumerate(steps):
        if not step.get("compensation") or step.get("undo") == "manual":
            continue
        name = step.get("destination") or default_destination_name()
        try:
            undo = destination_named(name).undo
        except DestinationUnavailable:
            continue  # not served: `_destination_problems` names it
        if not undo:
            problems.append(
                f"step {index + 1} ({step['name']}) declares compensation {step['compensation']!r} "
                f"but destination {name!r} has no undo: configure its undo, or mark the step "
                '"undo": "manual" (a person undoes it by hand)'
            )
    return problems


def _destination_problems(steps: list[dict]) -> list[str]:
    """The steps that name a destination the dispatchers do not serve (unknown or disabled): their handoffs
    would wait forever."""
    named = [
        (index, step["destination"]) for index, step in enumerate(steps) if step.get("destination")
    ]
    if not named:
        return []
    served = set(enabled_destination_names())
    return [
        f"step {index + 1} destination {name!r} is not an enabled destination "
        f"(enabled: {', '.join(sorted(served))})"
        for index, name in named
        if name not in served
    ]
