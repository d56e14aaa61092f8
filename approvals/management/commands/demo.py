import os
import secrets
from collections.abc import Sequence
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from approvals.management.demo_approvers import approvers_demo_load
from approvals.management.demo_cases import cases_demo_load, demo_times_now
from approvals.management.demo_observation import observation_demo_load
from approvals.models import Membership, Request, RequestEvent, RequestState, Role, Workspace
from approvals.request_search import request_search_text
from approvals.rules import ONBOARDING_V1, rules_for
from approvals.services.groups import (
    DESTINATION_ADMINS_GROUP,
    destination_admin_enroll,
    support_staff_enroll,
)
from approvals.services.rule_versions import rule_version_publish
from lib.json_config import JsonConfigRefused, parse_json_config
from outbox.clock import db_time
from outbox.payloads import payload_hash
from outbox.services.destination_configs import DestinationsRefused, destination_configs_apply

DEMO_USERS = {
    # username: [(workspace id, role), ...]
    "alice": [(7, Role.APPROVER)],
    # A second approver: a request alice corrects is decided by another approver (never by her).
    "dana": [(7, Role.APPROVER)],
    "bob": [(7, Role.REQUESTER)],
    "olga": [(7, Role.OPERATOR)],
    "mallory": [(8, Role.APPROVER)],
    "support": [],
}

REQUEST_42 = {
    "client_name": "Northwind Traders",
    "contact_email": "onboarding@northwind.example",
    "plan": "standard",
    "notes": "Kick-off call booked for Monday.",
}


# The demo's onboarding runs in three steps; the receiver refuses the welcome pack without a contact
# e-mail, which is optional here, so a request without one shows a failed step 3 and its compensation.
# The first step shows a step's business times and ordering (docs/intake.md): it may not go before the
# payload's `start_at` (optional), must have gone a week after the approval, and one client's actions reach
# the receiver in approval order (`demo_cases` approves two for one client).
STEP_CONSTRAINTS = {
    "order_by": {"field": "client_name"},
    "not_before": {"field": "start_at"},
    "finish_by": {"after_approval": 7 * 24 * 3600},
}
ONBOARDING_STEPS = [
    {"name": "create_client", "compensation": "delete_client", **STEP_CONSTRAINTS},
    {"name": "provision_account", "compensation": "deprovision_account"},
    {"name": "send_welcome_pack"},
]
# With the demo's destinations (`--destinations`, as `make run` loads it): each step goes to its own
# receiving system, on its own contract.
STEP_DESTINATIONS = {
    "create_client": "receiver",
    "provision_account": "accounts",
    "send_welcome_pack": "welcome-mail",
}
# The accounts step maps the approved payload onto a small envelope of the accounts service's, so that the
# approval page shows what each destination will receive (docs/destinations.md, "Request mapping").
STEP_REQUESTS = {
    "provision_account": {
        "body": {
            "account": {
                "name": {"$": "client_name"},
                "plan": {"$": "plan"},
                "notes": {"$": "notes", "default": ""},
            }
        }
    },
}
ONBOARDING_THREE_STEPS_SCHEMA = {
    **ONBOARDING_V1.schema,
    "required": [name for name in ONBOARDING_V1.schema["required"] if name != "contact_email"],
    "properties": {
        **ONBOARDING_V1.schema["properties"],
        "start_at": {"type": "string", "format": "date-time"},
    },
}


class Command(BaseCommand):
    help = "Load the demo: workspace 7 with request 42 revision 1 awaiting approval, workspace 8, demo users."

    def add_arguments(self, parser):
        parser.add_argument(
            "--password", default=None, help="Password for every demo user (default: random)."
        )
        parser.add_argument(
            "--destinations",
            default=None,
            help="A destinations file (demo/destinations.json) to apply first, @PORT@ and "
            "@DEMO_SMTP_PORT@ filled in; the onboarding's steps then go to them.",
        )

    @transaction.atomic
    def handle(self, *args, password=None, destinations=None, **options):
        User = get_user_model()
        if destinations:
            self._apply_destinations(Path(destinations))
        if User.objects.filter(username="alice").exists():
            self._enroll_olga_if_loaded_before(User)
            self._add_users_missing_since(User, password)
            if destinations and _published_before_routing(rules_for("onboarding").steps):
                self._publish(routed=True, notes="demo: the steps go to their destinations")
            self._load_observed_pilot(User)
            self._load_approvers(User)
            self._load_cases(User)
            for line in demo_times_now(now=db_time()):
                self.stdout.write(line)
            return
        password = password or secrets.token_urlsafe(9)
        w7 = Workspace.objects.create(pk=7, name="Client onboarding")
        Workspace.objects.create(pk=8, name="Supplier onboarding")
        users = _create_users(User, password)
        # A destination serves every workspace: its limits need a permission beyond olga's operator role.
        destination_admin_enroll(user=users["olga"])
        w7.on_call = users["olga"]
        w7.save()
        _create_request_42(w7, users["bob"])
        self._publish(
            routed=bool(destinations),
            notes="demo: three steps; the welcome pack needs a contact e-mail",
        )
        observation_demo_load(users=users)
        approvers_demo_load(users=users)
        cases_demo_load(users=users)
        self._report(password)

    def _apply_destinations(self, path: Path) -> None:
        text = (
            path.read_text()
            .replace("@PORT@", os.environ.get("PORT", "8000"))
            .replace("@DEMO_SMTP_PORT@", str(settings.DEMO_SMTP_PORT))
        )
        try:
            changes = destination_configs_apply(
                document=parse_json_config(text, source=str(path)), actor_label="manage.py demo"
            )
        except (JsonConfigRefused, DestinationsRefused) as exc:
            raise CommandError(f"the demo's destinations were refused: {exc}") from exc
        self.stdout.write(f"destinations: {len(changes)} change(s) from {path}")

    def _publish(self, *, routed: bool, notes: str) -> None:
        rule_version_publish(
            workflow="onboarding",
            schema=ONBOARDING_THREE_STEPS_SCHEMA,
            steps=_routed_steps() if routed else ONBOARDING_STEPS,
            actor=None,
            notes=notes,
        )

    def _enroll_olga_if_loaded_before(self, User) -> None:
        # Demo data loaded before destination limits needed a permission: olga, who sets them in the demo,
        # joins the group now (a no-op when she is in it).
        olga = User.objects.filter(username="olga").first()
        if olga is not None:
            destination_admin_enroll(user=olga)
        self.stdout.write(
            "demo data already loaded; nothing changed, except that olga is put in the "
            f"{DESTINATION_ADMINS_GROUP} group if she was not in it (passwords unchanged; "
            "`scripts/manage.sh demo_passwords` sets new ones)"
        )

    def _add_users_missing_since(self, User, password: str | None) -> None:
        # Demo data loaded before a demo user existed (dana, the second approver of workspace 7): add them,
        # each with the password given or a new one, printed on its own line.
        missing = {
            name: roles
            for name, roles in DEMO_USERS.items()
            if not User.objects.filter(username=name).exists()
        }
        if not missing:
            return
        password = password or secrets.token_urlsafe(9)
        _create_users(User, password, only=missing)
        self.stdout.write(f"demo users added: {', '.join(missing)}; their password:")
        self.stdout.write(password)

    def _load_observed_pilot(self, User) -> None:
        # Demo data loaded before the observed pilot existed: add it (docs/observation.md).
        users = {
            u.username: u
            for u in User.objects.filter(username__in=["alice", "bob", "dana", "olga"])
        }
        if len(users) == 4 and observation_demo_load(users=users):
            self.stdout.write("observed pilot added: workspace 7's offboarding, in observe mode")

    def _load_approvers(self, User) -> None:
        # Demo data loaded before the approvers' side existed (deadline, delegate, erasure): add it.
        names = ["alice", "bob", "dana", "mallory", "olga"]
        users = {u.username: u for u in User.objects.filter(username__in=names)}
        if len(users) == len(names):
            for words in approvers_demo_load(users=users):
                self.stdout.write(f"added: {words}")

    def _load_cases(self, User) -> None:
        # Demo data loaded before the held case, the ordered client and the later start existed: add them.
        names = ["alice", "bob", "olga"]
        users = {u.username: u for u in User.objects.filter(username__in=names)}
        if len(users) == len(names):
            for words in cases_demo_load(users=users):
                self.stdout.write(f"added: {words}")

    def _report(self, password: str) -> None:
        self.stdout.write(self.style.SUCCESS("Demo data loaded."))
        self.stdout.write(
            "Users: alice and dana (approvers, ws 7), bob (requester, ws 7), olga (operator, ws 7; in the "
            f"{DESTINATION_ADMINS_GROUP} group: sets destinations' limits), mallory (approver, ws 8), "
            "support (staff: read-only admin, reconcile and assign)"
        )
        self.stdout.write(
            "Password for every demo user (shown once; scripts/manage.sh demo_passwords sets new ones):"
        )
        self.stdout.write(f"    {password}")


def _routed_steps() -> list[dict]:
    """The onboarding's steps with the demo's destinations: each to its own, the accounts step mapped."""
    return [
        {
            **step,
            "destination": STEP_DESTINATIONS[step["name"]],
            **({"request": STEP_REQUESTS[step["name"]]} if step["name"] in STEP_REQUESTS else {}),
        }
        for step in ONBOARDING_STEPS
    ]


def _published_before_routing(steps: Sequence[dict]) -> bool:
    """The demo's steps as an earlier load published them: unrouted, or routed without the mappings or the
    first step's business constraints (a workflows file applied since is left as it is)."""
    routed = _routed_steps()
    return not steps[0].get("destination") or (
        list(steps) != routed and _without_later_keys(steps) == _without_later_keys(routed)
    )


def _without_later_keys(steps: Sequence[dict]) -> list[dict]:
    """The steps without what later loads of the demo added: the mappings and the business constraints."""
    return [
        {k: v for k, v in step.items() if k != "request" and k not in STEP_CONSTRAINTS}
        for step in steps
    ]


def _create_users(User, password: str, only: dict | None = None) -> dict:
    users = {}
    for username, memberships in (DEMO_USERS if only is None else only).items():
        user = User.objects.create_user(
            username=username, password=password, email=f"{username}@example.com"
        )
        if username == "support":
            support_staff_enroll(user=user)
        for workspace_id, role in memberships:
            Membership.objects.create(user=user, workspace_id=workspace_id, role=role)
        users[username] = user
    return users


def _create_request_42(workspace: Workspace, requester) -> None:
    request = Request(
        workflow="onboarding",
        workspace=workspace,
        number=42,
        revision=1,
        payload=REQUEST_42,
        payload_hash=payload_hash(REQUEST_42),
        state=RequestState.AWAITING_APPROVAL,
        requested_by=requester,
    )
    request.search_text = request_search_text(request)
    request.save(force_insert=True)
    RequestEvent.objects.create(
        request=request, to_state=request.state, actor=requester, reason="submitted"
    )
