"""Uploads bounded before Django reads them: a multipart body over `UPLOAD_MAX_BODY_BYTES` is answered 413
with the reason, a multipart body without a Content-Length 411, before any middleware or view reads it.

Django bounds what it reads to the Content-Length a request declares, so checking that number is enough;
`DATA_UPLOAD_MAX_MEMORY_SIZE` does not count files, and the observation import's own 256 KiB check ran
only after the whole file had been received (ASVS 5.0 5.2.1, docs/security.md)."""

from django.conf import settings
from django.http import HttpResponse

TOO_LARGE = (
    "The upload is {size} bytes; this console takes at most {limit} bytes ({kib} KiB) in one upload. "
    "Nothing was read or done: send a smaller file.\n"
)
NO_LENGTH = "An upload must declare its Content-Length. Nothing was read or done.\n"


def _refusal(text: str, status: int) -> HttpResponse:
    return HttpResponse(text, status=status, content_type="text/plain; charset=utf-8")


class LimitUploads:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if not request.META.get("CONTENT_TYPE", "").lower().startswith("multipart/"):
            return self.get_response(request)
        limit = settings.UPLOAD_MAX_BODY_BYTES
        try:
            size = int(request.META.get("CONTENT_LENGTH") or "")
        except ValueError:
            return _refusal(NO_LENGTH, 411)
        if size > limit:
            return _refusal(TOO_LARGE.format(size=size, limit=limit, kib=limit // 1024), 413)
        return self.get_response(request)
