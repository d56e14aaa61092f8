"""Checking a trigger: every reason it cannot be applied (envelope, workspace, workflow, payload under the
rules in force), with whatever it names that could be read."""

from dataclasses import dataclass

from django.conf import settings

from approvals.models import Workspace, WorkspaceWorkflow
from approvals.rules import known_workflows, rules_for, schema_problems
from outbox.payloads import canonical_json

DEFAULT_WORKFLOW = "onboarding"

ENVELOPE_SCHEMA = {
    "type": "object",
    "required": ["workspace_id", "reference", "revision", "payload"],
    "properties": {
        "workflow": {"type": "string", "minLength": 1, "maxLength": 40},
        "workspace_id": {"type": "integer", "minimum": 1, "maximum": 2**63 - 1},
        "reference": {"type": "string", "minLength": 1, "maxLength": 120},
        "revision": {"type": "integer", "minimum": 1, "maximum": 2_147_483_647},
        "payload": {"type": "object"},
    },
    "additionalProperties": False,
}


@dataclass
class CheckedTrigger:
    problems: list[str]
    workflow: str = ""
    workspace_id: int | None = None
    reference: str = ""
    revision: int | None = None
    rule_version: str = ""


def _whole_number(value: object) -> int | None:
    """The value as an int when JSON gave a whole number (2 or 2.0), else None; booleans are not numbers."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not value.is_integer():
        return None
    return int(value)


def _payload_size_problems(payload: object) -> list[str]:
    """A stored payload is shown, hashed and sent on: its size is bounded, whatever the body limit."""
    if not isinstance(payload, dict):
        return []
    size = len(canonical_json(payload).encode("utf-8"))
    limit = settings.INTAKE_MAX_PAYLOAD_BYTES
    return [f"payload: {size} bytes of JSON, over the limit of {limit}"] if size > limit else []


def _workspace_problems(workspace_id: int, workflow: str | None) -> list[str]:
    """Whether the workspace exists and takes triggers of this workflow (None: the workflow is unknown)."""
    if not Workspace.objects.filter(pk=workspace_id).exists():
        return [f"workspace_id: workspace {workspace_id} does not exist"]
    if (
        workflow is not None
        and WorkspaceWorkflow.objects.filter(
            workspace_id=workspace_id, workflow=workflow, accepts_triggers=False
        ).exists()
    ):
        return [f"workspace_id: workspace {workspace_id} does not accept {workflow} requests"]
    return []


def _read_workflow(checked: CheckedTrigger, workflow: object) -> bool:
    """Record the workflow the trigger names; True when it is one this product runs."""
    if not isinstance(workflow, str):
        return False
    checked.workflow = workflow[:40]
    if workflow not in known_workflows():
        checked.problems.append(f"workflow: unknown workflow {workflow!r}")
        return False
    return True


def trigger_check(document: dict) -> CheckedTrigger:
    """Every reason the trigger cannot be applied, with whatever it names that could be read."""
    checked = CheckedTrigger(problems=schema_problems(ENVELOPE_SCHEMA, document, root="body"))
    checked.problems.extend(_payload_size_problems(document.get("payload")))
    workflow = document.get("workflow", DEFAULT_WORKFLOW)
    workspace_id = document.get("workspace_id")
    reference = document.get("reference")
    revision = document.get("revision")
    payload = document.get("payload")
    if isinstance(reference, str):
        checked.reference = reference[:120]
    if (revision := _whole_number(revision)) is not None and 1 <= revision <= 2_147_483_647:
        checked.revision = revision
    workflow_known = _read_workflow(checked, workflow)
    if (workspace_id := _whole_number(workspace_id)) is not None and 1 <= workspace_id <= 2**63 - 1:
        checked.workspace_id = workspace_id
        checked.problems.extend(
            _workspace_problems(workspace_id, workflow if workflow_known else None)
        )
    if workflow_known and isinstance(payload, dict):
        rules = rules_for(workflow)
        checked.rule_version = rules.version
        checked.problems.extend(
            schema_problems(rules.schema, payload, root="payload", prefix="payload.")
        )
    return checked
