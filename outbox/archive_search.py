"""Reads of the archive for the console: the archived handoffs a search names, and one archived handoff,
always within the caller's workspaces (docs/operations.md, "Retention").

A search finds an archived handoff as it found it in the hot table: by its key exactly or as a prefix
("onboarding:7:42" finds every revision and step of request 42, through the archive's (workspace_id,
action_key) index), or by what people know, its search text (client name, e-mails, the workflow's
searchable fields; `outbox/search_text.py`), served on PostgreSQL by the archive's trigram index."""

from django.db.models import Q, QuerySet

from outbox.models import ArchivedHandoff
from outbox.search_text import search_words

SEARCH_LIMIT = 20


def archived_in(workspace_ids) -> QuerySet:
    return ArchivedHandoff.objects.filter(workspace_id__in=list(workspace_ids))


def archived_matching(
    *, workspace_ids, text: str, limit: int = SEARCH_LIMIT
) -> list[ArchivedHandoff]:
    """At most `limit` archived handoffs of these workspaces whose key is `text` or starts with it, or whose
    search text holds it, by key. One query; none when the text is blank."""
    text = text.strip()
    if not text:
        return []
    return list(
        archived_in(workspace_ids)
        .filter(Q(action_key__startswith=text) | Q(search_text__contains=search_words(text)))
        .defer("history", "receipt", "request", "search_text")
        .order_by("action_key")[:limit]
    )
