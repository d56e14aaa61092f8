"""The body of a request, read no further than a limit, with the transport checks that need no secret.

These run before any signature check so that a sender learns the real problem: a 401 tells a
dispatcher its credential is wrong, which a chunked or non-UTF-8 body is not.
"""

from dataclasses import dataclass

from django.http import HttpRequest

JSON_MEDIA_TYPE = "application/json"


@dataclass
class BodyRejected(Exception):
    """The request cannot be read as a JSON body; `status` and `code` are the answer to give."""

    status: int
    code: str
    detail: str
    limit: int | None = None

    def __str__(self) -> str:
        return f"{self.code}: {self.detail}"

    def as_dict(self) -> dict:
        limit = {} if self.limit is None else {"limit": self.limit}
        return {"error": self.code, "detail": self.detail, **limit}


def _declared_length(request: HttpRequest) -> int:
    raw = request.META.get("CONTENT_LENGTH") or ""
    if not raw.strip():
        # Chunked uploads come without a length, and a WSGI app cannot read them reliably.
        raise BodyRejected(400, "length_required", "a Content-Length header is required")
    try:
        declared = int(raw)
    except ValueError:
        raise BodyRejected(
            400, "bad_content_length", "Content-Length must be a whole number"
        ) from None
    if declared < 0:
        raise BodyRejected(400, "bad_content_length", "Content-Length must not be negative")
    return declared


def _check_media_type(request: HttpRequest) -> None:
    media_type, _, params = (request.META.get("CONTENT_TYPE") or "").partition(";")
    if media_type.strip().lower() != JSON_MEDIA_TYPE:
        raise BodyRejected(415, "unsupported_media_type", f"Content-Type must be {JSON_MEDIA_TYPE}")
    charset = params.strip().lower()
    if charset and charset.replace(" ", "") not in ("charset=utf-8", 'charset="utf-8"'):
        raise BodyRejected(415, "unsupported_media_type", "the only charset accepted is utf-8")


def read_json_body(request: HttpRequest, *, limit: int) -> str:
    """The body as text, after the checks that need no secret. Raises BodyRejected.

    Reads no more than limit + 1 bytes whatever the header claims, so an oversized body costs nothing.
    """
    declared = _declared_length(request)
    if declared > limit:
        raise BodyRejected(413, "body_too_large", f"the body must be at most {limit} bytes", limit)
    _check_media_type(request)
    raw = request.read(limit + 1)
    if len(raw) > limit:
        raise BodyRejected(413, "body_too_large", f"the body must be at most {limit} bytes", limit)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise BodyRejected(400, "body_not_utf8", "the body must be UTF-8") from None
