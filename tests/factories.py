"""Plain builders for test data: each returns saved objects with sensible defaults."""

from django.contrib.auth import get_user_model

from approvals.models import Membership, Request, RequestEvent, RequestState, Role, Workspace
from outbox.payloads import payload_hash

ONBOARDING_PAYLOAD = {
    "client_name": "Northwind Traders",
    "contact_email": "onboarding@northwind.example",
    "plan": "standard",
}


def make_user(username: str, *, workspace: Workspace | None = None, roles: tuple[str, ...] = (), **extra):
    user = get_user_model().objects.create_user(username=username, password="pw-" + username, **extra)
    for role in roles:
        Membership.objects.create(user=user, workspace=workspace, role=role)
    return user


def make_workspace(pk: int, name: str | None = None) -> Workspace:
    return Workspace.objects.create(pk=pk, name=name or f"Workspace {pk}")


def make_request(workspace: Workspace, number: int, requested_by, payload: dict | None = None,
                 revision: int = 1, state: str = RequestState.AWAITING_APPROVAL) -> Request:
    payload = dict(ONBOARDING_PAYLOAD if payload is None else payload)
    request = Request.objects.create(
        workflow="onboarding", workspace=workspace, number=number, revision=revision, payload=payload,
        payload_hash=payload_hash(payload), state=state, requested_by=requested_by,
    )
    RequestEvent.objects.create(request=request, to_state=state, actor=requested_by, reason="submitted")
    return request


def onboarding_world():
    """Workspace 7 (alice approver, bob requester, olga operator, carol requester) and 8 (mallory approver),
    with request 42 revision 1 of workspace 7 awaiting approval."""
    w7, w8 = make_workspace(7, "Client onboarding"), make_workspace(8, "Supplier onboarding")
    users = {
        "alice": make_user("alice", workspace=w7, roles=(Role.APPROVER,)),
        "bob": make_user("bob", workspace=w7, roles=(Role.REQUESTER,)),
        "olga": make_user("olga", workspace=w7, roles=(Role.OPERATOR,)),
        "mallory": make_user("mallory", workspace=w8, roles=(Role.APPROVER,)),
    }
    w7.on_call = users["olga"]
    w7.save()
    request = make_request(w7, 42, users["bob"])
    return {"w7": w7, "w8": w8, "request": request, **users}
