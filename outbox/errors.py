class OutboxError(Exception):
    """Base class for domain errors of the outbox."""


class HandoffNotFound(OutboxError):
    pass


class InvalidTransition(OutboxError):
    def __init__(self, action_key: str, from_state: str, to_state: str):
        super().__init__(f"{action_key}: cannot move from {from_state} to {to_state}")
        self.from_state = from_state
        self.to_state = to_state


class LeaseLost(OutboxError):
    """The worker's lease was taken over (or expired and settled): its outcome is not recorded."""


class RiskNotConfirmed(OutboxError):
    """Sending again while the outcome is uncertain needs an explicit confirmation of the risk."""


class ActionKeyExists(OutboxError):
    pass


class ManualSettleNotAllowed(OutboxError):
    """A person's account of the receiver does not apply to the handoff as it is now (checked under the lock)."""


class InvalidActionInput(OutboxError):
    """The action as asked cannot be done with this input (a 422): nothing was written."""


class ReasonRequired(InvalidActionInput):
    pass


class AssigneeNotOperator(InvalidActionInput):
    pass


class AssigneeNotFound(InvalidActionInput):
    """The owner named for an assign is no user: nothing was assigned."""


class CompensationBlocked(OutboxError):
    """The instance cannot be compensated now (a step's outcome is unknown, or it is being compensated)."""


class CaseHoldRefused(OutboxError):
    """A hold or resume of one case that cannot be done as asked (held already, not held, nothing to hold)."""
