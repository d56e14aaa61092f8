"""A request's payload as one person may see it: redacted, except the fields that person typed themselves.

A requester was shown their own contact e-mail as `[redacted]`: redaction hid personal data from the one
person it belongs to and who typed it. Redaction still decides what is hidden (`outbox.redaction`); this
module decides only whose a field is. A field is the viewer's own when the viewer is the request's requester
and the revision that last set the field's value was made by them (its first history event's actor). A value
an approver or an operator typed in a correction is theirs, not the requester's, and stays hidden; so do
secrets (a token, a password, a configured secret inside a text) whoever typed them."""

from django.db.models import Exists, OuterRef, Subquery

from approvals.models import Request, RequestEvent
from outbox.redaction import redact


def _made_by(revision) -> int | None:
    """Who made a revision: its first history event's actor (the services write it with the revision);
    for a row without a history, its corrector, else its requester, as the columns say."""
    if revision.has_history:
        return revision.first_actor_id
    return revision.corrected_by_id or revision.requested_by_id


def _authors(obj: Request) -> dict[str, int | None]:
    """Who set each top-level field's current value: the maker of the revision that last changed it."""
    first_event = RequestEvent.objects.filter(request=OuterRef("pk"), from_state="").order_by(
        "at", "id"
    )
    revisions = (
        Request.objects.filter(
            workspace_id=obj.workspace_id,
            workflow=obj.workflow,
            number=obj.number,
            revision__lte=obj.revision,
        )
        .annotate(
            first_actor_id=Subquery(first_event.values("actor_id")[:1]),
            has_history=Exists(first_event),
        )
        .order_by("revision")
        .only("payload", "corrected_by", "requested_by")
    )
    authors: dict[str, int | None] = {}
    before: dict = {}
    for revision in revisions:
        payload, author_id = revision.payload, _made_by(revision)
        payload = payload if isinstance(payload, dict) else {}
        for key, value in payload.items():
            if key not in before or before[key] != value:
                authors[key] = author_id
        before = payload
    return authors


def own_fields(user, obj: Request) -> set[str]:
    """The top-level fields of `obj` that `user` typed: none unless `user` is its requester."""
    if user is None or not user.is_authenticated or obj.requested_by_id != user.pk:
        return set()
    return {key for key, author in _authors(obj).items() if author == user.pk}


def payload_shown_to(user, obj: Request) -> dict:
    """The payload redacted for `user`: their own fields with personal data kept (secrets still masked),
    every other field redacted as on any screen. One query, only for the request's requester."""
    payload, shown = obj.payload, redact(obj.payload)
    mine = own_fields(user, obj) if isinstance(payload, dict) else set()
    if not mine:
        return shown
    kept = redact({k: v for k, v in payload.items() if k in mine}, keep_personal=True)
    return {key: kept.get(key, value) for key, value in shown.items()}
