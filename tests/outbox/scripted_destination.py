"""A destination that answers scripted failures first, then delivers to the real in-process receiver."""

from outbox.destinations import InProcessDestination
from outbox.failures import DeliveryResult
from outbox.models import FailureClass
from outbox.retry import RetryPolicy

# Scripted answers: a call that timed out, and a receipt that is no receipt.
TIMEOUT = DeliveryResult.failed(FailureClass.UNCERTAIN, "read_timeout", "timeout")
MALFORMED = DeliveryResult.failed(
    FailureClass.MALFORMED, "malformed_receipt", "receipt has no task_id"
)


class ScriptedDestination(InProcessDestination):
    """The real in-process receiver, with scripted failures answered first (one per call)."""

    def __init__(self, *failures: DeliveryResult, policy: RetryPolicy | None = None, **flags):
        super().__init__(
            retry_policy=policy or RetryPolicy(max_attempts=3, base_delay=0.0, max_delay=0.0)
        )
        self.script = list(failures)
        self.calls = 0
        for name, value in flags.items():
            setattr(self, name, value)

    def deliver(self, outgoing):
        self.calls += 1
        if self.script:
            return self.script.pop(0)
        return super().deliver(outgoing)
