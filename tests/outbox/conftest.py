import pytest

from outbox.clock import db_now
from outbox.destinations import InProcessDestination
from outbox.failures import DeliveryResult
from outbox.models import Handoff, HandoffState
from outbox.payloads import payload_hash
from outbox.retry import RetryPolicy


class ScriptedDestination(InProcessDestination):
    """The real in-process receiver, with scripted failures answered first (one per call)."""

    def __init__(self, *failures: DeliveryResult, policy: RetryPolicy | None = None, **flags):
        super().__init__(retry_policy=policy or RetryPolicy(max_attempts=3, base_delay=0.0, max_delay=0.0))
        self.script = list(failures)
        self.calls = 0
        for name, value in flags.items():
            setattr(self, name, value)

    def deliver(self, outgoing):
        self.calls += 1
        if self.script:
            return self.script.pop(0)
        return super().deliver(outgoing)


@pytest.fixture
def make_handoff():
    def make(n: int = 1, workspace_id: int = 7, **fields) -> Handoff:
        payload = fields.pop("payload", {"client_name": f"Client {n}", "plan": "standard"})
        return Handoff.objects.create(
            action_key=f"onboarding:{workspace_id}:{n}:1", workflow="onboarding", workspace_id=workspace_id,
            source_ref=f"request {n} revision 1", source_id=n, payload=payload, payload_hash=payload_hash(payload),
            state=fields.pop("state", HandoffState.PENDING), next_attempt_at=fields.pop("next_attempt_at", db_now()),
            **fields,
        )

    return make
