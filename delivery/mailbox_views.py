"""The demo mailbox's page: what the e-mail destination sent, as the recipient would see it. Only when
DEMO_MAILBOX_DIR is set (`make run`); signed-in people only."""

from pathlib import Path

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from delivery.mailbox import mailbox_messages


@require_GET
@login_required
def mailbox(request: HttpRequest) -> HttpResponse:
    if not settings.DEMO_MAILBOX_DIR:
        raise Http404("the demo mailbox is not running here")
    messages = mailbox_messages(Path(settings.DEMO_MAILBOX_DIR))
    return render(request, "delivery/mailbox.html", {"messages": messages})
