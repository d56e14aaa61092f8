"""Writes of the source application, one module per sub-domain: requests and revisions, decisions,
corrections, cancellation, rule versions, workflow modes, memberships, staff groups.

An approval writes the decision, the request state and the outbox row in one transaction
(`decisions.request_approve`). The names are re-exported here for callers.
"""

from approvals.services.cancellation import request_cancel
from approvals.services.corrections import handoff_correct, request_correct_by_approver
from approvals.services.decisions import request_approve, request_reject
from approvals.services.groups import (
    DESTINATION_ADMINS_GROUP,
    SUPPORT_ACTIONS,
    SUPPORT_GROUP,
    SUPPORT_VIEWS,
    destination_admin_enroll,
    destination_admins_group_sync,
    support_group_sync,
    support_staff_enroll,
)
from approvals.services.memberships import membership_grant, membership_revoke
from approvals.services.requests import (
    request_revise,
    request_revise_by_requester,
    request_submit,
    revision_add_locked,
    revision_create,
)
from approvals.services.rule_versions import rule_version_publish
from approvals.services.workflow_modes import workflow_mode_set

__all__ = [
    "DESTINATION_ADMINS_GROUP",
    "SUPPORT_ACTIONS",
    "SUPPORT_GROUP",
    "SUPPORT_VIEWS",
    "destination_admin_enroll",
    "destination_admins_group_sync",
    "handoff_correct",
    "membership_grant",
    "membership_revoke",
    "request_approve",
    "request_cancel",
    "request_correct_by_approver",
    "request_reject",
    "request_revise",
    "request_revise_by_requester",
    "request_submit",
    "revision_add_locked",
    "revision_create",
    "rule_version_publish",
    "support_group_sync",
    "support_staff_enroll",
    "workflow_mode_set",
]
