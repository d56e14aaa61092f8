"""The approval deadlines' e-mails as the product records them: handoffs to its e-mail destination
(`approvals/services/approval_notices.py`), each with its recipient, subject and body, in the order
recorded. What a mail server receives is the smtp kind's tests' and `test_approval_mail.py`'s."""

from dataclasses import dataclass

from approvals.services.approval_notices import NOTICE_WORKFLOW
from outbox.models import Handoff


@dataclass(frozen=True)
class RecordedMail:
    to: list[str]
    subject: str
    body: str


def recorded_mail() -> list[RecordedMail]:
    payloads = (
        Handoff.objects.filter(workflow=NOTICE_WORKFLOW)
        .order_by("id")
        .values_list("payload", flat=True)
    )
    return [RecordedMail([p["to"]], p["subject"], p["body"]) for p in payloads]
