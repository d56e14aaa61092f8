"""No console input holds a NUL character, and PostgreSQL cannot store one in text: a query string or form
field with one is refused with 422 and its reason before any view reads it. Views that read raw values
(search boxes, notes, reasons, corrections) passed it to the database, which failed the request with a 500.

The signed APIs (CSRF-exempt views) check their own input and answer in their own JSON format."""

from django.http import HttpResponse
from django.utils.html import escape

REASON = (
    "A value you sent contains a NUL character (\\0), which cannot be stored. "
    "Nothing was done: remove it and send again."
)


def _holds_nul(values) -> bool:
    return any(
        "\x00" in key or any("\x00" in value for value in items) for key, items in values.lists()
    )


class RefuseNulMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_view(self, request, view_func, view_args, view_kwargs):
        if getattr(view_func, "csrf_exempt", False):
            return None
        # request.POST holds form fields only (empty for other methods and content types): nothing else is read.
        if _holds_nul(request.GET) or _holds_nul(request.POST):
            return HttpResponse(
                f'<p class="message error" role="alert">{escape(REASON)}</p>', status=422
            )
        return None
