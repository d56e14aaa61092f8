"""The least a console page must do, served by the same gunicorn as the console in
bench/console_operators_bench.py: this machine's ceiling for 20 operators opening pages back to back.

    gunicorn bench.console_ceiling:application ...

The WSGI application is `config.wsgi`'s (the same settings, middleware and start-up); only the URLconf is
this module's: the product's patterns, unchanged and first, then `bench/ceiling/`, so that a console page
resolves as it does under `make run` and the ceiling is never in the product's URLconf. The ceiling's view
does what every console page must: a session-authenticated request (the session and the user read through
the product's middleware), one query on an index (the newest handoff of workspace 7, on
`handoff_ws_keyset_idx`) and a small template, without the console's navigation or any of a page's own work.
"""

import os

from django.conf import settings

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import config.wsgi  # noqa: E402  (Django set up as `make run` sets it up, the product's URLconf imported)

application = config.wsgi.application
# Patterns are resolved from this setting at each request; set after config.wsgi, so that a config.wsgi which
# resolves the URLconf at start-up (as 79f01a7's did) reads the product's, never this module half imported.
settings.ROOT_URLCONF = __name__

from django.contrib.auth.decorators import login_required  # noqa: E402
from django.http import HttpResponse  # noqa: E402
from django.template import engines  # noqa: E402
from django.urls import path  # noqa: E402

from config.urls import urlpatterns as product_patterns  # noqa: E402
from outbox.models import Handoff  # noqa: E402

CEILING_PATH = "/bench/ceiling/"
TEMPLATE = engines["django"].from_string(
    "<!doctype html><html lang=en><title>Handoffs</title>"
    "<p>Signed in as {{ username }}. Newest handoff of workspace 7: {{ newest }}.</p></html>"
)


@login_required
def ceiling(request):
    newest = (
        Handoff.objects.filter(workspace_id=7)
        .order_by("-created_at", "-id")
        .values_list("id", flat=True)
        .first()
    )
    return HttpResponse(
        TEMPLATE.render({"username": request.user.get_username(), "newest": newest})
    )


urlpatterns = [*product_patterns, path(CEILING_PATH.strip("/") + "/", ceiling)]
