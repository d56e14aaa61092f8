class DeliveryError(Exception):
    """Base class for the receiver's domain errors."""


class ActionKeyConflict(DeliveryError):
    """The action key exists with other content; nothing was changed."""

    def __init__(self, action_key: str, existing_task_id: str):
        super().__init__(f"{action_key} already names task {existing_task_id} with another payload")
        self.action_key = action_key
        self.existing_task_id = existing_task_id


class InvalidTaskPayload(DeliveryError):
    def __init__(self, reasons: list[str]):
        super().__init__("; ".join(reasons))
        self.reasons = reasons


class TaskNotFound(DeliveryError):
    pass


class InvalidTaskStatus(DeliveryError):
    """Not a status, or a move the task's status cannot make (it only moves forward); nothing changed."""

    def __init__(self, code: str, detail: str):
        super().__init__(detail)
        self.code = code
        self.detail = detail
