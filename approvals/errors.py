class ApprovalsError(Exception):
    """Base class for domain errors of the source application."""


class WorkspaceNotFound(ApprovalsError):
    pass


class RequestNotFound(ApprovalsError):
    pass


class ApprovalDenied(ApprovalsError):
    """The actor may not decide this request (not a member, not an approver, or the requester)."""


class StaleRevision(ApprovalsError):
    """The request changed since it was shown: the posted payload hash or revision is not current."""


class InvalidRequestState(ApprovalsError):
    pass


class InvalidPayload(ApprovalsError):
    def __init__(self, reasons: list[str]):
        super().__init__("; ".join(reasons))
        self.reasons = reasons


class RoleChangeRefused(ApprovalsError):
    """A role grant or revocation that cannot be made: the role is already held, or is not held."""


class IdentityRefused(ApprovalsError):
    """A provider identity that is not signed in or not bound: the message says why, for the person.

    `existing` names the account a first sign-on's user name belongs to, which its holder may link."""

    def __init__(self, message: str, *, existing: str = ""):
        super().__init__(message)
        self.existing = existing


class ApprovalLinkRefused(ApprovalsError):
    """An approval link that cannot be used: its words say why (changed, decided, expired, used...)."""
