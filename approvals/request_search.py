"""What a request revision is found by before it has a handoff (issue 39, "Find by what people know"): the
same lower-cased text as a handoff's (`outbox/search_text.py`), written with the revision in its transaction
and rewritten by an erasure, so that a request is found by its client, e-mail and the workflow's searchable
fields; and the one search of requests that reads it (docs/console.md, "Search by what people know")."""

from django.db.models import Exists, OuterRef, Q, QuerySet, Subquery

from approvals.models import Request
from approvals.rules import rules_for, schema_searchable_fields
from lib.search_syntax import is_payload_hash, request_number, search_typed, typed_key
from outbox.search_text import search_text, text_contains


def request_search_text(request: Request) -> str:
    """The search text of one revision (saved or about to be): its key, its reference, its client name,
    e-mails and the fields the workflow in force marks `"x-searchable": true`."""
    return search_text(
        action_key=request.action_key,
        source_ref=request.source_ref,
        payload=request.payload,
        fields=schema_searchable_fields(rules_for(request.workflow).schema),
    )


def requests_matching(queryset: QuerySet, text: str) -> QuerySet:
    """The request revisions of `queryset` a search names: a request number ("42", "#42", "request 42"), a
    whole key (whatever step follows: the revision it names or a later one of that request, so that a list
    of newest revisions still finds a corrected request by its old handoffs' key), a whole payload hash (in
    the same way: the revision that carried it or a later one of that request, `carried_hash`), or else text
    their search text holds, which PostgreSQL's trigram index serves (`request_search_trgm_idx`). The one
    request search: the approvals queue, the Requests page, My requests and the admin; each passes its own
    scope in `queryset`. Raises `BadSearch` (with the reason) for a search that cannot be read."""
    text = search_typed(text)
    if not text:
        return queryset
    number = request_number(text)
    if number is not None:
        return queryset.filter(number=number)
    key = typed_key(text)
    if key is not None:
        return queryset.filter(
            workflow=key.workflow,
            workspace_id=key.workspace_id,
            number=key.number,
            revision__gte=key.revision,
        )
    if is_payload_hash(text):
        return queryset.filter(carried_hash(text.lower()))
    return text_contains(queryset, text)


def carried_hash(digest: str) -> Q:
    """A revision of a request one of whose revisions up to it carried the payload hash `digest`: a list of
    newest revisions finds a corrected request by the hash its approver saw before the correction. The
    revisions of the hash are read from `request_payload_hash_idx` (approvals 0017), then their request's
    revisions from its unique index. The request is matched on equalities alone, which lets PostgreSQL
    start from the hash's few revisions (a semi-join with `<=` in it cannot), and the revision is compared
    after, with the first revision of that request that carried it."""
    carriers = Request.objects.filter(
        payload_hash=digest,
        workspace_id=OuterRef("workspace_id"),
        workflow=OuterRef("workflow"),
        number=OuterRef("number"),
    )
    first = carriers.order_by("revision").values("revision")[:1]
    return Q(Exists(carriers), revision__gte=Subquery(first))
