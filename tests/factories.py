"""Factories for test data (factory_boy): each builds saved rows with sensible defaults.

The `make_*` functions and `onboarding_world` are the short forms most tests use; they build through the
factories below, so every workspace, user, request and handoff of the suite is made in one place.
"""

import factory
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.utils import timezone

from approvals.management.commands.demo import ONBOARDING_STEPS, ONBOARDING_THREE_STEPS_SCHEMA
from approvals.models import Membership, Request, RequestEvent, RequestState, Role, Workspace
from approvals.services import destination_admin_enroll, rule_version_publish
from delivery.models import ReceiverTask
from delivery.services import payload_hash as receiver_payload_hash
from outbox.breaker_rules import pause_threshold
from outbox.clock import db_now, db_now_plus
from outbox.failures import DeliveryResult
from outbox.models import (
    DestinationHealth,
    DestinationHold,
    FailureClass,
    Handoff,
    HandoffState,
    HoldKind,
    PauseReason,
)
from outbox.payloads import payload_hash
from outbox.search_text import search_text
from outbox.services.breaker import destination_hold, destination_record_results
from reconciliation.models import Finding, FindingKind, ReconciliationRun, RunStatus

ONBOARDING_PAYLOAD = {
    "client_name": "Northwind Traders",
    "contact_email": "onboarding@northwind.example",
    "plan": "standard",
}


class WorkspaceFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Workspace

    name = factory.Sequence(lambda n: f"Workspace {n}")


class UserFactory(factory.django.DjangoModelFactory):
    """A user whose password is `pw-<username>`. `memberships=[(workspace, role), ...]` gives it roles,
    `permissions=["app_label.codename", ...]` Django permissions of its own."""

    class Meta:
        model = get_user_model()
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    password = factory.LazyAttribute(lambda o: f"pw-{o.username}")

    @classmethod
    def _create(cls, model_class, *args, **kwargs):
        return model_class.objects.create_user(*args, **kwargs)

    @factory.post_generation
    def memberships(self, create, extracted, **kwargs):
        for workspace, role in extracted or ():
            MembershipFactory(user=self, workspace=workspace, role=role)

    @factory.post_generation
    def permissions(self, create, extracted, **kwargs):
        for name in extracted or ():
            app_label, codename = name.split(".")
            self.user_permissions.add(
                Permission.objects.get(content_type__app_label=app_label, codename=codename)
            )


class MembershipFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Membership

    user = factory.SubFactory(UserFactory)
    workspace = factory.SubFactory(WorkspaceFactory)
    role = Role.REQUESTER


class RequestFactory(factory.django.DjangoModelFactory):
    """A request revision with its first history row, as if submitted by `requested_by`."""

    class Meta:
        model = Request
        skip_postgeneration_save = True

    workflow = "onboarding"
    workspace = factory.SubFactory(WorkspaceFactory)
    number = factory.Sequence(lambda n: 10_000 + n)
    revision = 1
    payload = factory.LazyFunction(lambda: dict(ONBOARDING_PAYLOAD))
    payload_hash = factory.LazyAttribute(lambda o: payload_hash(o.payload))
    state = RequestState.AWAITING_APPROVAL
    requested_by = factory.SubFactory(UserFactory)

    @factory.post_generation
    def submitted(self, create, extracted, **kwargs):
        if create:
            RequestEvent.objects.create(
                request=self, to_state=self.state, actor=self.requested_by, reason="submitted"
            )


class HandoffFactory(factory.django.DjangoModelFactory):
    """An outbox row of request `number` revision 1 in workspace 7, written directly (no service, no event).

    A pending handoff is due now on the database clock (due times are compared there); one in any other
    state has no due time, as the state machine leaves it."""

    class Meta:
        model = Handoff

    class Params:
        number = factory.Sequence(lambda n: 100_000 + n)

    workflow = "onboarding"
    workspace_id = 7
    action_key = factory.LazyAttribute(lambda o: f"{o.workflow}:{o.workspace_id}:{o.number}:1")
    source_ref = factory.LazyAttribute(lambda o: f"request {o.number} revision 1")
    source_id = factory.LazyAttribute(lambda o: o.number)
    payload = factory.LazyAttribute(
        lambda o: {**ONBOARDING_PAYLOAD, "client_name": f"Client {o.number}"}
    )
    payload_hash = factory.LazyAttribute(lambda o: payload_hash(o.payload))
    # Found as the product's rows are (`handoff_record` writes it).
    search_text = factory.LazyAttribute(
        lambda o: search_text(action_key=o.action_key, source_ref=o.source_ref, payload=o.payload)
    )
    state = HandoffState.PENDING
    next_attempt_at = factory.LazyAttribute(
        lambda o: db_now() if o.state == HandoffState.PENDING else None
    )


class ReceiverTaskFactory(factory.django.DjangoModelFactory):
    """A task at the receiver, in its own database, written directly (not through the receiver's API)."""

    class Meta:
        model = ReceiverTask
        database = "delivery"

    action_key = factory.Sequence(lambda n: f"onboarding:7:{200_000 + n}:1")
    payload = factory.LazyFunction(lambda: dict(ONBOARDING_PAYLOAD))
    payload_hash = factory.LazyAttribute(lambda o: receiver_payload_hash(o.payload))


class ReconciliationRunFactory(factory.django.DjangoModelFactory):
    """A finished full reconciliation run (no workspace)."""

    class Meta:
        model = ReconciliationRun

    trigger = "command"
    status = RunStatus.COMPLETED
    batch_size = 100
    finished_at = factory.LazyFunction(timezone.now)


class FindingFactory(factory.django.DjangoModelFactory):
    """An open finding of workspace 7, first and last seen by one run."""

    class Meta:
        model = Finding

    kind = FindingKind.MISSING_AT_RECEIVER
    action_key = factory.Sequence(lambda n: f"onboarding:7:{300_000 + n}:1")
    workspace_id = 7
    workflow = "onboarding"
    next_action = "look the key up at the receiver"
    first_run = factory.SubFactory(ReconciliationRunFactory)
    last_run = factory.SelfAttribute("first_run")
    last_seen_at = factory.LazyFunction(timezone.now)


def make_user(
    username: str, *, workspace: Workspace | None = None, roles: tuple[str, ...] = (), **extra
):
    return UserFactory(
        username=username, memberships=[(workspace, role) for role in roles], **extra
    )


def grant_destination_admin(user):
    """Put `user` in the destination admins group, as the demo does for olga: with an operator role, the user
    may set destinations' limits. Returns the user."""
    destination_admin_enroll(user=user)
    return user


def make_workspace(pk: int, name: str | None = None) -> Workspace:
    return WorkspaceFactory(pk=pk, name=name or f"Workspace {pk}")


def make_request(
    workspace: Workspace,
    number: int,
    requested_by,
    payload: dict | None = None,
    revision: int = 1,
    state: str = RequestState.AWAITING_APPROVAL,
) -> Request:
    return RequestFactory(
        workspace=workspace,
        number=number,
        requested_by=requested_by,
        revision=revision,
        state=state,
        payload=dict(ONBOARDING_PAYLOAD if payload is None else payload),
    )


def onboarding_world():
    """Workspace 7 (alice approver, bob requester, olga operator) and 8 (mallory approver),
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


def three_step_onboarding_world():
    """`onboarding_world` with the demo's three-step onboarding published by a rules admin (the receiver
    refuses step 3, the welcome pack, without a contact e-mail). The admin is `world["rules_admin"]`."""
    world = onboarding_world()
    world["rules_admin"] = get_user_model().objects.create_superuser(
        "rules-admin", password="x-long-enough-pw"
    )
    rule_version_publish(
        workflow="onboarding",
        schema=ONBOARDING_THREE_STEPS_SCHEMA,
        steps=ONBOARDING_STEPS,
        actor=world["rules_admin"],
        notes="three steps",
    )
    return world


def retry_after_hold(
    destination: str, seconds: float, reason: str = "HTTP 429", *, since: float = 0.0
) -> DestinationHold:
    """A Retry-After hold on the destination (its row created if new), as a 429 answer writes it: from
    `since` seconds from now (database clock) until `seconds` from now."""
    DestinationHealth.objects.get_or_create(name=destination)
    return DestinationHold.objects.create(
        destination=destination,
        kind=HoldKind.RETRY_AFTER,
        reason=reason,
        starts_at=db_now_plus(since),
        ends_at=db_now_plus(seconds),
        set_by="the destination (its answer)",
    )


def retry_after_rows(destination: str):
    """The destination's Retry-After holds not ended, to move their times in a test."""
    return DestinationHold.objects.filter(
        destination=destination, kind=HoldKind.RETRY_AFTER, ended_at__isnull=True
    )


def pause_by_breaker(
    destination: str,
    *,
    reason: str = PauseReason.UNREACHABLE,
    detail: str = "",
    code: str = "",
    next_probe_in: float | None = None,
) -> DestinationHealth:
    """Pause the destination the way its breaker does: its threshold of failed answers counted by the
    breaker's own service (an event, its hold until a probe succeeds, its probe schedule), or for
    `PauseReason.UNSERVABLE` a dispatcher's unservable hold (`destination_hold`, no probe). `code`: the
    failed answers' reason code (`connect_failed`, `credential_rejected`). `next_probe_in`:
    seconds from now to its next probe (database clock), instead of the breaker's schedule. A test that
    writes only `DestinationHealth.state` pauses nothing: the holds say what is paused."""
    if reason == PauseReason.UNSERVABLE:
        destination_hold(name=destination, reason=detail or "a secret it names is missing")
    else:
        refused = reason == PauseReason.CREDENTIAL
        answer = DeliveryResult.failed(
            FailureClass.CREDENTIAL if refused else FailureClass.TRANSIENT,
            code or ("credential_rejected" if refused else "connect_failed"),
            detail or ("HTTP 401" if refused else "connection refused"),
            status_code=401 if refused else None,
        )
        destination_record_results(name=destination, results=[answer] * pause_threshold(reason))
    health = DestinationHealth.objects.with_breaker().get(name=destination)
    assert health.breaker_pause_reason == reason, f"{destination} was not paused for {reason}"
    if next_probe_in is not None:
        DestinationHealth.objects.filter(pk=health.pk).update(
            next_probe_at=db_now_plus(next_probe_in)
        )
        health.refresh_from_db(fields=["next_probe_at"])
    return health


def paused_by_breaker(destination: str, reason: str = "") -> bool:
    """Whether the destination's breaker pauses it now (for `reason`, if given): a live hold of the
    breaker's, as every reader of the product asks it."""
    health = DestinationHealth.objects.paused_by_breaker().filter(name=destination).first()
    return health is not None and reason in ("", health.breaker_pause_reason)
