class ReconciliationError(Exception):
    """Base class for domain errors of reconciliation that are not bad input."""


class FindingNotFound(ReconciliationError):
    pass


class InvalidFindingTransition(ReconciliationError):
    def __init__(self, finding_id: int, from_status: str, to_status: str):
        super().__init__(f"finding {finding_id} is {from_status}; it cannot become {to_status}")
        self.from_status = from_status
        self.to_status = to_status


class NoteRequired(ValueError):
    pass


class RepairNotConfirmed(ValueError):
    """The receiver, asked about the key, does not hold the task the repair names."""


class RepairDetailsRequired(ValueError):
    pass
