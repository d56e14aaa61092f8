"""What a request revision is found by before it has a handoff (issue 39, "Find by what people know"): the
same lower-cased text as a handoff's (`outbox/search_text.py`), written with the revision in its transaction
and rewritten by an erasure, so that a request awaiting a decision is found by its client, e-mail and the
workflow's searchable fields (docs/console.md, "Search")."""

from approvals.models import Request
from approvals.rules import rules_for, schema_searchable_fields
from outbox.search_text import search_text


def request_search_text(request: Request) -> str:
    """The search text of one revision (saved or about to be): its key, its reference, its client name,
    e-mails and the fields the workflow in force marks `"x-searchable": true`."""
    return search_text(
        action_key=request.action_key,
        source_ref=request.source_ref,
        payload=request.payload,
        fields=schema_searchable_fields(rules_for(request.workflow).schema),
    )
