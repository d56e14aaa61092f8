"""What the provider tests share: a provider's destinations file and workflows file applied as an operator
applies them (`manage.py destinations apply`, `manage.py workflows apply`; only `url` is pointed at the test
server), requests approved through the product, the dispatcher's passes, and seed 000's acceptance
scenario, its effects counted at the provider."""

import json
import time
from dataclasses import dataclass
from io import StringIO
from pathlib import Path

from django.core.management import call_command

from approvals.services import request_approve, request_revise, request_submit
from outbox.destinations.registry import destination_named
from outbox.dispatcher import sweep
from outbox.models import Handoff, HandoffEvent, HandoffState
from tests.providers.harness import ProviderProcess

S = HandoffState
FILES = Path(__file__).parent / "files"
WORKSPACE = 7


def apply_files(provider: str, url: str, directory: Path) -> None:
    """`files/<provider>.destinations.json` (its `url` pointed at `url`) and `<provider>.workflows.json`."""
    document = json.loads((FILES / f"{provider}.destinations.json").read_text())
    for destination in document["destinations"]:
        destination["url"] = url
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
        assert kept.same_payload(lost.payload, lost.payload_hash), "never an overwrite"

    [distinct] = drive(flow.approve(2, other))
    assert distinct.state == S.DELIVERED
    assert provider.effects() == {k.action_key: 1 for k in (lost, revised, distinct)}
    assert len({lost.destination_id, revised.destination_id, distinct.destination_id}) == 3
    return [lost, revised, distinct]
