"""Reads of the archive for the console: the archived handoffs whose action key a search names, and one
archived handoff, always within the caller's workspaces (docs/operations.md, "Retention").

The key is matched exactly or as a prefix ("onboarding:7:42" finds every revision and step of request 42),
through the archive's (workspace_id, action_key) index; a search inside keys is not offered here, since it
would read the whole archive."""

from django.db.models import QuerySet

from outbox.models import ArchivedHandoff

SEARCH_LIMIT = 20


def archived_in(workspace_ids) -> QuerySet:
    return ArchivedHandoff.objects.filter(workspace_id__in=list(workspace_ids))


def archived_matching(
    *, workspace_ids, text: str, limit: int = SEARCH_LIMIT
) -> list[ArchivedHandoff]:
    """At most `limit` archived handoffs of these workspaces whose key is `text` or starts with it, by key.
    One query; none when the text is blank."""
    text = text.strip()
    if not text:
        return []
    return list(
        archived_in(workspace_ids)
        .filter(action_key__startswith=text)
        .defer("history", "receipt", "request")
        .order_by("action_key")[:limit]
    )
