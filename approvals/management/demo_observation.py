"""The demo's observed pilot: workspace 7's offboarding starts in observe mode, with five approved cases the
product observed (nothing sent), three of them compared with what the current (manual) process did (two
agree, one does not and waits for its owner's explanation), and a pilot brief: dana owns it, and its
exception path is written down. A newcomer opens Observation and sees the comparison (docs/observation.md).

Loaded by `manage.py demo`, through the product's own services, once (a demo loaded before gets it too)."""

from approvals.models import Mode, PilotBrief, Request, WorkflowMode
from approvals.services.decisions import request_approve
from approvals.services.observation import CurrentProcessOutcome, observed_outcome_record
from approvals.services.requests import request_submit
from approvals.services.rule_versions import rule_version_publish

WORKFLOW = "offboarding"
SCHEMA = {
    "type": "object",
    "required": ["client_name", "last_day"],
    "properties": {
        "client_name": {"type": "string", "minLength": 1, "maxLength": 200},
        "last_day": {"type": "string", "format": "date"},
        "notes": {"type": "string", "maxLength": 2000},
    },
    "additionalProperties": True,
}
CLIENTS = [
    ("Contoso Ltd", "2026-12-31"),
    ("Fabrikam Inc", "2026-12-18"),
    ("Adventure Works", "2027-01-15"),
    ("Tailspin Toys", "2027-01-31"),
    ("Wide World Importers", "2027-02-28"),
]
EXCEPTION_PATH = (
    "olga (operator, workspace 7) takes every offboarding exception within a working day: she checks the "
    "account at the receiver, closes it by hand if needed and records the repair; dana decides on anything "
    "that needs a business call."
)
# What the current process did with the first three cases: the first two as the product plans, the third
# closed by phone with no task anywhere (a disagreement for dana to explain).
RECORDED = [
    (True, "", "Account-closure task created by hand in the receiver.", "OPS-1041"),
    (True, "", "Task created by hand; client told by e-mail.", "OPS-1042"),
    (False, "", "Closed by phone with the client; no task was created.", ""),
]


def observation_demo_load(*, users: dict) -> bool:
    """Load the observed pilot unless it is there; True when it was loaded now."""
    if PilotBrief.objects.filter(workflow=WORKFLOW).exists():
        return False
    rule_version_publish(
        workflow=WORKFLOW,
        schema=SCHEMA,
        steps=[{"name": "close_account"}],
        actor=None,
        notes="demo: an observed pilot (docs/observation.md)",
    )
    WorkflowMode.objects.update_or_create(
        workflow=WORKFLOW, defaults={"mode": Mode.OBSERVE, "updated_by": None}
    )
    PilotBrief.objects.create(workflow=WORKFLOW, owner=users["dana"], exception_path=EXCEPTION_PATH)
    keys = [_observed_case(users, client, last_day) for client, last_day in CLIENTS]
    for key, (created, receiver, outcome, reference) in zip(keys, RECORDED, strict=False):
        observed_outcome_record(
            workspace_id=7,
            entry=CurrentProcessOutcome(
                key=key,
                task_created=created,
                receiver=receiver,
                outcome=outcome,
                reference=reference,
            ),
            actor=users["olga"],
        )
    return True


def _observed_case(users: dict, client: str, last_day: str) -> str:
    request: Request = request_submit(
        workspace_id=7,
        payload={"client_name": client, "last_day": last_day},
        requested_by=users["bob"],
        workflow=WORKFLOW,
    )
    handoff = request_approve(
        workspace_id=7,
        number=request.number,
        revision=request.revision,
        actor=users["alice"],
        payload_hash=request.payload_hash,
        workflow=WORKFLOW,
    )
    return handoff.action_key
