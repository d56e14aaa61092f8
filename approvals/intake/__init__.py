"""Intake of signed triggers: requests that other systems send, twice, late and out of order.

A trigger is verified (`signatures`: Standard Webhooks signature, timestamp tolerance, replay),
deduplicated by its webhook id and applied as a revision of the sender's request (`receive`), once
checked (`checks`: envelope, workspace, workflow, payload under the rules in force). The console reads
them through `selectors`. The names are re-exported here for callers.

The trigger contract is in docs/intake.md.
"""

from approvals.intake.checks import DEFAULT_WORKFLOW, ENVELOPE_SCHEMA
from approvals.intake.receive import CONTENDED_RETRIES, TriggerAnswer, trigger_receive
from approvals.intake.selectors import trigger_visible_to, triggers_visible_to
from approvals.intake.signatures import (
    WEBHOOK_ID_MAX_LENGTH,
    SignedMessage,
    TriggerReplayed,
    TriggerSignatureRejected,
    trigger_signature_verify,
)

__all__ = [
    "CONTENDED_RETRIES",
    "DEFAULT_WORKFLOW",
    "ENVELOPE_SCHEMA",
    "WEBHOOK_ID_MAX_LENGTH",
    "SignedMessage",
    "TriggerAnswer",
    "TriggerReplayed",
    "TriggerSignatureRejected",
    "trigger_receive",
    "trigger_signature_verify",
    "trigger_visible_to",
    "triggers_visible_to",
]
