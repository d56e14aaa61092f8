"""The e-mails of approval deadlines (a reminder, an escalation, a request closed unapproved) ride the
outbox's engine: each is a handoff to the product's e-mail destination (`approval-mail`, the smtp kind,
through EMAIL_HOST), recorded in the transaction that records the notice, under the stable key
`approval-notice:<workspace>:<request id>:<kind>:<person id>`. The dispatchers claim, lease, retry and settle
it like any handoff, so a mail server down when the sweep runs delays the mail instead of losing it, and the
smtp kind's Message-ID (derived from the key) keeps it one message (docs/intake.md, "Approval deadlines")."""

from django.conf import settings

from approvals.models import Request
from outbox.models import Handoff
from outbox.services.destination_configs import destination_config_put, product_mail_config
from outbox.services.recording import handoff_record

NOTICE_WORKFLOW = "approval_notices"
KEY_PREFIX = "approval-notice:"
ACTOR = "approval notices"


def approval_mail_destination_sync() -> str:
    """The product's e-mail destination in step with the mail settings; its name. Written only when it
    differs, audited (`destination_config_put`, as an e-mail alert channel's)."""
    name = settings.APPROVAL_MAIL_DESTINATION
    destination_config_put(
        name=name,
        kind="smtp",
        config=product_mail_config(),
        enabled=True,
        actor_label=ACTOR,
    )
    return name


def notice_key(request: Request, kind: str, person_id: int) -> str:
    return f"{KEY_PREFIX}{request.workspace_id}:{request.pk}:{kind}:{person_id}"


def notice_handoff_record(
    *, request: Request, kind: str, person_id: int, to: str, subject: str, body: str
) -> Handoff:
    """The notice's e-mail as a handoff. Inside the caller's transaction (the notice's own). Its source is
    no request revision (`source_id` 0): a request's screens and reconciliation count only its steps."""
    return handoff_record(
        workflow=NOTICE_WORKFLOW,
        workspace_id=request.workspace_id,
        source_ref=f"{kind} about request {request.number} revision {request.revision}",
        source_id=0,
        action_key=notice_key(request, kind, person_id),
        payload={"to": to, "subject": subject, "body": body},
        destination=approval_mail_destination_sync(),
    )
