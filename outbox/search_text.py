"""What the console's and the admin's search find a handoff by: one lower-cased text per handoff, written
when it is recorded (docs/console.md, "Search").

It holds the key, the request reference, the client's name, every e-mail field and the fields the workflow's
schema marks `"x-searchable": true` (docs/intake.md). Personal values are in it so that support staff find a
case by the e-mail a customer gives; screens show them redacted as before. On PostgreSQL a trigram index
(pg_trgm, migration 0024) serves `LIKE '%…%'` on it; SQLite reads the column."""

from collections.abc import Iterable

from django.db.models import QuerySet

ALWAYS_SEARCHABLE = ("client_name",)
# A field whose name holds this is an e-mail address: searchable in every workflow.
EMAIL_KEY_PART = "email"
MAX_VALUE_LENGTH = 200


def search_words(text: str) -> str:
    """Text as the search compares it: lower case, single spaces. The stored text and what a person types
    both pass through here, in Python, so both sides are folded the same way (accents included)."""
    return " ".join(str(text).split()).lower()


def _searchable_values(payload: object, fields: Iterable[str]) -> list[str]:
    if not isinstance(payload, dict):
        return []
    wanted = set(ALWAYS_SEARCHABLE) | set(fields)
    return [
        str(value)[:MAX_VALUE_LENGTH]
        for key, value in payload.items()
        if (key in wanted or EMAIL_KEY_PART in key.lower())
        and isinstance(value, str | int | float)
        and not isinstance(value, bool)
    ]


def search_text(
    *, action_key: str, source_ref: str, payload: object, fields: Iterable[str] = ()
) -> str:
    """The text a handoff is found by: its key, its request reference and its searchable payload values."""
    return search_words(" | ".join([action_key, source_ref, *_searchable_values(payload, fields)]))


def text_search(queryset: QuerySet, text: str) -> QuerySet:
    """Handoffs (or request revisions) whose search text holds `text`: key, request, client name, e-mails,
    the workflow's searchable fields. One condition on one column, which PostgreSQL's trigram index serves
    (the payload read as JSON text took 6.7 s at 10,000,000 handoffs). Every list of handoffs and requests
    searches through here, the admin too."""
    return queryset.filter(search_text__contains=search_words(text))
