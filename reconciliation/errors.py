class ReconciliationError(Exception):
    """Base class for domain errors of reconciliation that are not bad input."""


class RunDeferred(ReconciliationError):
    """A scheduled run not started: an operator's pause or maintenance window holds its destination, which
    asks nothing of it meanwhile; the first scheduled run after the hold compares."""


class FindingNotFound(ReconciliationError):
    pass


class InvalidFindingTransition(ReconciliationError):
    def __init__(self, finding_id: int, from_status: str, to_status: str):
        super().__init__(f"finding {finding_id} is {from_status}; it cannot become {to_status}")
        self.from_status = from_status
        self.to_status = to_status


class InvalidRepairInput(ReconciliationError):
    """A finding action or repair cannot be recorded with this input (a 422): nothing was written."""


class NoteRequired(InvalidRepairInput):
    pass


class RepairNotConfirmed(InvalidRepairInput):
    """The receiver, asked about the key, does not hold the task the repair names."""


class RepairDetailsRequired(InvalidRepairInput):
    pass


class FindingNotOnHandoff(InvalidRepairInput):
    pass
