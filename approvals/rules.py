"""The eligibility rules of each workflow, with a version stored on every decision and handoff.

The rules in force are the newest stored `RuleVersion` of the workflow. A workflow with no stored
version runs under its built-in rules below (version 1 of every known workflow). Publishing new rules
(`approvals.services.rule_version_publish`) adds a version; decisions keep the version they stored.
"""

from dataclasses import dataclass

import jsonschema


@dataclass(frozen=True)
class RuleSet:
    workflow: str
    version: str
    schema: dict


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

# Version 1 of each workflow the product knows. Kept under its old name for existing callers.
BUILT_IN_RULES = {ONBOARDING_V1.workflow: ONBOARDING_V1}
CURRENT_RULES = BUILT_IN_RULES


def known_workflows() -> set[str]:
    from approvals.models import RuleVersion

    return set(BUILT_IN_RULES) | set(RuleVersion.objects.values_list("workflow", flat=True).distinct())


def rules_for(workflow: str) -> RuleSet:
    """The rules in force for the workflow: its newest stored version, else its built-in rules."""
    from approvals.models import RuleVersion

    stored = RuleVersion.objects.filter(workflow=workflow).order_by("-number").values("version", "schema").first()
    if stored is not None:
        return RuleSet(workflow=workflow, version=stored["version"], schema=stored["schema"])
    try:
        return BUILT_IN_RULES[workflow]
    except KeyError:
        raise LookupError(f"no rules for workflow {workflow!r}") from None


def schema_problems(schema: dict, document: object, *, root: str = "payload", prefix: str = "") -> list[str]:
    """Every way `document` fails `schema`, each named by where it is (`root` for the document itself)."""
    validator = jsonschema.Draft202012Validator(schema)
    problems = []
    for error in sorted(validator.iter_errors(document), key=lambda e: [str(p) for p in e.absolute_path]):
        where = prefix + ".".join(str(p) for p in error.absolute_path) if error.absolute_path else root
        problems.append(f"{where}: {error.message}")
    return problems


def payload_problems(workflow: str, payload: object, rules: RuleSet | None = None) -> list[str]:
    """Every reason the payload fails the workflow's rules (current ones unless given); empty when it passes."""
    return schema_problems((rules or rules_for(workflow)).schema, payload)
