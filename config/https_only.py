"""The signed APIs and /metrics over plain HTTP, when HTTPS is enforced: refused with 403, never redirected.

A client that sent one of them to http:// has already sent its body, signature or bearer token in clear
text; a redirect would let it succeed on the second try and hide the mistake. SecurityMiddleware exempts
these paths from its redirect (`SECURE_REDIRECT_EXEMPT`); this answers them instead."""

import re

from django.conf import settings
from django.http import HttpResponse

REFUSAL = (
    "HTTPS is required: this endpoint is not redirected. Nothing was done; send the request to its "
    "https:// address, and treat any credential it carried as exposed.\n"
)


class RefusePlainHttpApis:
    def __init__(self, get_response):
        self.get_response = get_response
        self.paths = [re.compile(pattern) for pattern in settings.HTTPS_ONLY_PATHS]

    def __call__(self, request):
        if (
            settings.SECURE_SSL_REDIRECT
            and not request.is_secure()
            and any(path.search(request.path.lstrip("/")) for path in self.paths)
        ):
            return HttpResponse(REFUSAL, status=403, content_type="text/plain; charset=utf-8")
        return self.get_response(request)
