"""The demo mailbox's page: what the e-mail destination sent, as the recipient would see it. Only when
DEMO_MAILBOX_DIR is set (`make run`); signed-in people only.

Addresses are personal data that every other screen hides (outbox/redaction.py), but delivery imports no other
app: this page redacts in its own way, keeping only an address's domain (`…@example.com`) in the To and From
lines, the subject and the body. The list is passed as `mail`, never `messages`: base.html renders that name as
Django's status messages."""

from dataclasses import replace
from pathlib import Path

import re2
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from delivery.mailbox import Stored, mailbox_messages

# RE2 (linear time, as outbox/redaction.py): a message's body is anyone's text.
_ADDRESS = re2.compile(r"[A-Za-z0-9._%+-]+@([A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*)")


def without_addresses(text: str) -> str:
    """`text` with each e-mail address's local part hidden: `ops@example.com` becomes `…@example.com`."""
    # A function, not a template: the binding's template substitution mangles a non-ASCII replacement.
    return _ADDRESS.sub(lambda found: "…@" + found.group(1), text)


def _shown(message: Stored) -> Stored:
    # The headers are `email` header objects (str subclasses): made plain strings before they are rewritten.
    return replace(
        message,
        message_id=str(message.message_id),
        date=str(message.date),
        to=without_addresses(str(message.to)),
        sender=without_addresses(str(message.sender)),
        subject=without_addresses(str(message.subject)),
        body=without_addresses(str(message.body)),
    )


@require_GET
@login_required
def mailbox(request: HttpRequest) -> HttpResponse:
    if not settings.DEMO_MAILBOX_DIR:
        raise Http404("the demo mailbox is not running here")
    mail = [_shown(m) for m in mailbox_messages(Path(settings.DEMO_MAILBOX_DIR))]
    return render(request, "delivery/mailbox.html", {"mail": mail})
