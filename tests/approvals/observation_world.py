"""A workflow observed in two workspaces: onboarding in observe mode, owned by dana (approver, workspace 7),
with three observed cases in workspace 7 (requests 42, 43, 44) and one in workspace 8 (request 50)."""

from approvals.models import Mode, PilotBrief, Role, WorkflowMode
from approvals.services import request_approve
from tests.factories import make_request, make_user, onboarding_world

EXCEPTION_PATH = "olga takes the exception within a day and repairs it by hand"


def _approve(request, approver):
    return request_approve(
        workspace_id=request.workspace_id,
        number=request.number,
        revision=request.revision,
        actor=approver,
        payload_hash=request.payload_hash,
    )


def observed_world() -> dict:
    world = onboarding_world()
    w7, w8 = world["w7"], world["w8"]
    world["dana"] = make_user("dana", workspace=w7, roles=(Role.APPROVER,))
    world["otto"] = make_user("otto", workspace=w8, roles=(Role.OPERATOR,))
    world["rita"] = make_user("rita", workspace=w8, roles=(Role.REQUESTER,))
    WorkflowMode.objects.create(workflow="onboarding", mode=Mode.OBSERVE)
    PilotBrief.objects.create(
        workflow="onboarding", owner=world["dana"], exception_path=EXCEPTION_PATH
    )
    requests = [
        world["request"],
        make_request(w7, 43, world["bob"]),
        make_request(w7, 44, world["bob"]),
    ]
    world["cases"] = [_approve(r, world["alice"]).action_key for r in requests]
    world["foreign_case"] = _approve(
        make_request(w8, 50, world["rita"]), world["mallory"]
    ).action_key
    return world
