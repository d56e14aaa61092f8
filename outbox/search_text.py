"""What the console's and the admin's search find a handoff by: one lower-cased text per handoff, written
when it is recorded (docs/console.md, "Search").

It holds the key, the request reference, the client's name, every e-mail field and the fields the workflow's
schema marks `"x-searchable": true` (docs/intake.md). Personal values are in it so that support staff find a
case by the e-mail a customer gives; screens show them redacted as before. A search finds the handoffs
whose text holds what was typed, each word of it at a word's start (`text_search`); on PostgreSQL a GIN
index of the words' starts serves it (migration 0032); SQLite reads the column."""

import re
from collections.abc import Iterable

from django.db import connections
from django.db.models import BooleanField, F, Func, QuerySet, Value

ALWAYS_SEARCHABLE = ("client_name",)
# A field whose name holds this is an e-mail address: searchable in every workflow.
EMAIL_KEY_PART = "email"
MAX_VALUE_LENGTH = 200
# What separates the words of a search text: ASCII punctuation, spaces and controls. Letters, digits and any
# non-ASCII character make words, so that "Müller" or "佐藤" is one word on any database locale. The same
# class splits the text in the index's function (`search_text_words`, outbox migration 0032).
SEPARATORS = r"[\x01-/:-@\[-`{-\x7f]"
# How much of a word's start the index holds (its function stops there): a longer typed word is found by
# its first characters in the index, and then whole in the text.
WORD_START_LENGTH = 24


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


def typed_words(text: str) -> list[str]:
    """The words of what a person typed, folded as the stored text is (`search_words`)."""
    return [word for word in re.split(f"{SEPARATORS}+", search_words(text)) if word]


class _StartsWords(Func):
    """`search_text_words(search_text) @@ '<word>' & …::tsquery`: the expression of the index of migration
    0032, and a tsquery of exact entries, one a typed word (cast, not parsed, so that the words are the
    ones `typed_words` split)."""

    template = "search_text_words(%(expressions)s AS tsquery)"
    arg_joiner = ") @@ CAST("
    output_field = BooleanField()


def _starts_a_word(word: str) -> str:
    """A regular expression both PostgreSQL and Python read: `word` at the start of a word of the text."""
    return f"(^|{SEPARATORS}){re.escape(word)}"


def text_search(queryset: QuerySet, text: str) -> QuerySet:
    """Handoffs whose search text (key, request, client name, e-mails, the workflow's searchable fields) holds
    `text` as typed (case aside), each word of it at the start of a word there: "acme", "Acme Corp", "ac" and
    "acme c" find "ACME Corp"; "cme" and "corp acme" do not. Text of no word (punctuation) is matched as
    typed.

    On PostgreSQL the words are one condition the words' index serves (`handoff_search_words_idx`,
    migration 0032): each typed word is one entry of it, so GIN skips through a common word's long list by a
    rare word's short one (the trigrams of `Client 5000007` are all common: the trigram index intersected
    lists of millions at 10,000,000 handoffs); the text, and a word longer than the index holds, are then
    compared with the few rows found. SQLite reads the column. Every list of handoffs searches through here,
    the admin too; request revisions are searched by `text_contains` until their table has such an index."""
    words = typed_words(text)
    if words and connections[queryset.db].vendor == "postgresql":
        entries = " & ".join(f"'{word[:WORD_START_LENGTH]}'" for word in sorted(set(words)))
        queryset = queryset.filter(_StartsWords(F("search_text"), Value(entries)))
        words = [word for word in words if len(word) > WORD_START_LENGTH]
    for word in words:
        queryset = queryset.filter(search_text__regex=_starts_a_word(word))
    return text_contains(queryset, text)


def text_contains(queryset: QuerySet, text: str) -> QuerySet:
    """Rows whose search text holds `text` anywhere (`LIKE '%…%'`). For request revisions PostgreSQL's
    trigram index on it serves it (`request_search_trgm_idx`, approvals migration 0015); for handoffs it is
    compared with the rows `text_search` found by their words."""
    return queryset.filter(search_text__contains=search_words(text))
