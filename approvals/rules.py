"""The eligibility rules of each workflow, with a version stored on every decision and handoff."""

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

CURRENT_RULES = {ONBOARDING_V1.workflow: ONBOARDING_V1}


def rules_for(workflow: str) -> RuleSet:
    try:
        return CURRENT_RULES[workflow]
    except KeyError:
        raise LookupError(f"no rules for workflow {workflow!r}") from None


def payload_problems(workflow: str, payload: object) -> list[str]:
    """Every reason the payload fails the workflow's current rules; empty when it passes."""
    validator = jsonschema.Draft202012Validator(rules_for(workflow).schema)
    problems = []
    for error in sorted(validator.iter_errors(payload), key=lambda e: list(e.absolute_path)):
        where = ".".join(str(p) for p in error.absolute_path) or "payload"
        problems.append(f"{where}: {error.message}")
    return problems
