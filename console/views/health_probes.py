"""Probes for orchestrators and load balancers: /healthz (the process answers) and /readyz (it can serve).

Open to anyone who reaches the port, as probes are: no sign-in, no session, nothing secret in the answer
(which database and what is wrong, never an error's text or a setting). docs/operations.md, "Health
endpoints".
"""

from django.http import HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from lib.readiness import database_problems


def _plain(text: str, status: int) -> HttpResponse:
    return HttpResponse(text + "\n", status=status, content_type="text/plain; charset=utf-8")


@require_GET
@never_cache
def healthz(request: HttpRequest) -> HttpResponse:
    """Alive: the process answers requests. No database: a database outage must not get it restarted."""
    return _plain("ok", 200)


@require_GET
@never_cache
def readyz(request: HttpRequest) -> HttpResponse:
    """Ready: every database answers and has every migration applied; 503 with the reasons otherwise."""
    problems = database_problems()
    if problems:
        return _plain("not ready\n" + "\n".join(problems), 503)
    return _plain("ready", 200)
