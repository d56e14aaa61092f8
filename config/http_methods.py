"""TRACE and TRACK are refused with 405 on every path, before any view: Django's admin views answer any
method, and a TRACE echoed back would show a script the request's headers (cookies included)."""

from django.http import HttpResponseNotAllowed

REFUSED = frozenset({"TRACE", "TRACK"})


class RefuseTraceMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.method in REFUSED:
            return HttpResponseNotAllowed(["GET", "HEAD", "POST"])
        return self.get_response(request)
