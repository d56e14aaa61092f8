"""The source application's models, one module per subject; re-exported here (Django finds them here)."""

from approvals.models.approval_links import ApprovalLink
from approvals.models.audit_exports import AuditExport
from approvals.models.deadlines import (
    ApprovalDelegation,
    ApprovalNotice,
    ApprovalPolicy,
    NoticeKind,
)
from approvals.models.identities import SignOnIdentity, SignOnIdentityEvent
from approvals.models.observation import (
    ObservedOutcome,
    ObservedOutcomeQuerySet,
    OutcomeSource,
    PilotBrief,
)
from approvals.models.requests import (
    REQUEST_FINAL_STATES,
    REQUEST_TRANSITIONS,
    Approval,
    Decision,
    Request,
    RequestEvent,
    RequestReasonCode,
    RequestState,
)
from approvals.models.sign_ins import InitialPassword, SignedInSession
from approvals.models.triggers import RequestReference, TriggerOutcome, TriggerRecord
from approvals.models.workflows import (
    Mode,
    RuleVersion,
    WorkflowMode,
    WorkflowModeChange,
    WorkflowModeQuerySet,
    WorkspaceWorkflow,
)
from approvals.models.workspaces import Membership, Role, RoleChange, Workspace

__all__ = [
    "REQUEST_TRANSITIONS",
    "Approval",
    "ApprovalDelegation",
    "ApprovalLink",
    "ApprovalNotice",
    "ApprovalPolicy",
    "AuditExport",
    "Decision",
    "InitialPassword",
    "Membership",
    "Mode",
    "NoticeKind",
    "ObservedOutcome",
    "ObservedOutcomeQuerySet",
    "OutcomeSource",
    "PilotBrief",
    "Request",
    "RequestEvent",
    "RequestReference",
    "RequestReasonCode",
    "RequestState",
    "REQUEST_FINAL_STATES",
    "Role",
    "RoleChange",
    "RuleVersion",
    "SignedInSession",
    "SignOnIdentity",
    "SignOnIdentityEvent",
    "TriggerOutcome",
    "TriggerRecord",
    "WorkflowMode",
    "WorkflowModeChange",
    "WorkflowModeQuerySet",
    "Workspace",
    "WorkspaceWorkflow",
]
