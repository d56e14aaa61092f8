"""What a request revision is found by before it has a handoff (issue 39, "Find by what people know"): the
same lower-cased text as a handoff's (`outbox/search_text.py`), written with the revision in its transaction
and rewritten by an erasure, so that a request awaiting a decision is found by its client, e-mail and the
workflow's searchable fields (docs/console.md, "Search")."""

from approvals.rules import rules_for, searchable_fields
from outbox.search_text import search_text


def request_source_ref(*, number: int, revision: int) -> str:
    """The reference a revision's handoffs carry (`Handoff.source_ref`), searched by in both lists."""
    return f"request {number} revision {revision}"


def request_search_text(
    *, workflow: str, workspace_id: int, number: int, revision: int, payload: object
) -> str:
    """The search text of one revision: its key, its reference, its client name, e-mails and the fields the
    workflow in force marks `"x-searchable": true`."""
    return search_text(
        action_key=f"{workflow}:{workspace_id}:{number}:{revision}",
        source_ref=request_source_ref(number=number, revision=revision),
        payload=payload,
        fields=searchable_fields(rules_for(workflow).version),
    )
