"""What the provider tests share: a provider's destinations file and workflows file applied as an operator
applies them (`manage.py destinations apply`, `manage.py workflows apply`; only `url`, and the origin of an
OAuth2 `auth.token_url`, are pointed at the test server), requests approved through the product, the
dispatcher's passes, seed 000's acceptance scenario, its effects counted at the provider, and what the
requester reads."""

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from io import StringIO
from pathlib import Path
from urllib.parse import urlsplit

from django.core.management import call_command
from django.db.models import F

from approvals.services import request_approve, request_revise, request_submit
from console.selectors import requests_of
from outbox.destinations.registry import destination_named
from outbox.dispatch.dispatcher import sweep
from outbox.models import (
    DestinationHealth,
    DestinationState,
    Handoff,
    HandoffEvent,
    HandoffState,
    PauseReason,
)
from outbox.services.work_pull import handoffs_pull_work_status
from tests.providers.harness import ProviderProcess

S = HandoffState
FILES = Path(__file__).parent / "files"
WORKSPACE = 7
# Another provider's destination, beside the one under test: its token variable, workflow and a payload.
NEIGHBOURS = {
    "postmark": (
        "HANDOFF_DEST_POSTMARK_SERVER_TOKEN",
        "welcome_mail",
        {"client_name": "Contoso", "contact_email": "grace@contoso.example"},
    ),
    "stripe": (
        "HANDOFF_DEST_STRIPE_SECRET_KEY",
        "billing_customer",
        {"client_name": "Contoso", "billing_email": "billing@contoso.example"},
    ),
}


def apply_files(
    provider: str, url: str, directory: Path, read_timeout: float | None = None
) -> None:
    """`files/<provider>.destinations.json` (its `url`, and its token endpoint's origin, pointed at `url`;
    `read_timeout` in place of the file's, when given) and `<provider>.workflows.json`."""
    document = json.loads((FILES / f"{provider}.destinations.json").read_text())
    for destination in document["destinations"]:
        destination["url"] = url
        if read_timeout is not None:
            destination["read_timeout"] = read_timeout
        auth = destination.get("auth", {})
        if "token_url" in auth:
            auth["token_url"] = url + urlsplit(auth["token_url"]).path
    applied = directory / f"{provider}.destinations.json"
    applied.write_text(json.dumps(document))
    call_command("destinations", "apply", str(applied), stdout=StringIO())
    call_command("workflows", "apply", str(FILES / f"{provider}.workflows.json"), stdout=StringIO())


@dataclass
class Flow:
    """One workflow's requests in workspace 7: submitted by bob, approved by alice."""

    world: dict
    workflow: str

    def approve(self, number: int, payload: dict) -> Handoff:
        request = request_submit(
            workspace_id=WORKSPACE,
            payload=payload,
            requested_by=self.world["bob"],
            number=number,
            workflow=self.workflow,
        )
        return self._approve(request)

    def revise(self, number: int, payload: dict) -> Handoff:
        """A changed payload: a new revision of the request, approved."""
        request = request_revise(
            workspace_id=WORKSPACE,
            number=number,
            payload=payload,
            actor=self.world["bob"],
            workflow=self.workflow,
        )
        return self._approve(request)

    def _approve(self, request) -> Handoff:
        return request_approve(
            workspace_id=WORKSPACE,
            number=request.number,
            revision=request.revision,
            actor=self.world["alice"],
            payload_hash=request.payload_hash,
            workflow=self.workflow,
        )


def stored(handoff: Handoff) -> Handoff:
    return Handoff.objects.get(pk=handoff.pk)


def drive(*handoffs: Handoff, seconds: float = 20.0) -> list[Handoff]:
    """The dispatcher's passes until each handoff is settled (delivered or with a person), within a deadline
    (a Retry-After is waited out, never slept through blindly); the handoffs as stored."""
    deadline = time.monotonic() + seconds
    while True:
        sweep()
        now = [stored(h) for h in handoffs]
        if all(h.state in (S.DELIVERED, S.NEEDS_ATTENTION) for h in now):
            return now
        if time.monotonic() > deadline:
            raise AssertionError(
                f"not settled in {seconds}s: {[(h.action_key, h.state) for h in now]}"
            )
        time.sleep(0.05)


def went_to_a_person(handoff: Handoff) -> bool:
    return HandoffEvent.objects.filter(handoff=handoff, to_state=S.NEEDS_ATTENTION).exists()


def acceptance_000(
    provider: ProviderProcess, flow: Flow, first: dict, changed: dict, other: dict
) -> list[Handoff]:
    """Seed 000 at this provider: the answer lost after the provider committed -> exactly one effect,
    settled without a person; a changed payload -> a new revision with a new key, the first effect left as
    it was; a later distinct request -> a distinct effect. Every effect counted at the provider, per key."""
    provider.drop_next()
    [lost] = drive(flow.approve(1, first))
    assert lost.state == S.DELIVERED and not went_to_a_person(lost)
    assert provider.effects() == {lost.action_key: 1}

    [revised] = drive(flow.revise(1, changed))
    assert revised.state == S.DELIVERED
    assert revised.action_key != lost.action_key, "a new revision has a new key"
    assert provider.effects() == {lost.action_key: 1, revised.action_key: 1}
    destination = destination_named(lost.destination)
    kept = destination.lookup(lost.action_key) if destination.supports_lookup else None
    if kept is not None:
        assert kept.task_id == lost.destination_id
        assert kept.same_payload(lost.sent_body, lost.payload_hash), "never an overwrite"

    [distinct] = drive(flow.approve(2, other))
    assert distinct.state == S.DELIVERED
    assert provider.effects() == {k.action_key: 1 for k in (lost, revised, distinct)}
    assert len({lost.destination_id, revised.destination_id, distinct.destination_id}) == 3
    return [lost, revised, distinct]


def sweep_until(until: Callable[[], bool], *, what: str, seconds: float = 20.0) -> None:
    """The dispatcher's passes until `until()` holds, within a deadline."""
    deadline = time.monotonic() + seconds
    while not until():
        assert time.monotonic() < deadline, f"not in {seconds}s: {what}"
        sweep()
        time.sleep(0.05)


def paused_by_its_credential(destination: str) -> bool:
    health = DestinationHealth.objects.filter(name=destination).first()
    return health is not None and (health.state, health.pause_reason) == (
        DestinationState.PAUSED,
        PauseReason.CREDENTIAL,
    )


@contextmanager
def neighbour(
    name: str, world: dict, monkeypatch, directory: Path
) -> Iterator[Callable[[], Handoff]]:
    """Another provider-style server, reached by its own files; yields `deliver_one()`: a request of its
    workflow approved and driven, delivered with exactly one effect counted at that provider."""
    token_env, workflow, payload = NEIGHBOURS[name]
    token = f"{name}-neighbour-token"
    monkeypatch.setenv(token_env, token)
    other = ProviderProcess(name, token=token)
    try:
        apply_files(name, other.url, directory)

        def deliver_one() -> Handoff:
            [done] = drive(Flow(world=world, workflow=workflow).approve(90, payload))
            assert done.state == S.DELIVERED
            assert other.effects() == {done.action_key: 1}
            return done

        yield deliver_one
    finally:
        other.stop()


def pull_work_status_now() -> None:
    """The work status pull as its schedule runs it, every delivered step's last read moved past its
    `every_seconds` (instead of waiting that long)."""
    Handoff.objects.exclude(work_checked_at=None).update(
        work_checked_at=F("work_checked_at") - timedelta(hours=1)
    )
    handoffs_pull_work_status()


def requester_reads(world: dict, number: int) -> str:
    """The headline bob reads for his request `number` (console/request_status.py)."""
    [request] = [r for r in requests_of(world["bob"]) if r.number == number]
    return request.status.headline.text
