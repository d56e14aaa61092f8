"""The truth of the erasure claims (`request.erased`, `handoff.erased`, `archived.erased`, made by
`console/templatetags/erasures.py`): the id of the erasure the row is marked with, read from the row."""

from collections.abc import Callable

from approvals.models import Request
from outbox.models import ArchivedHandoff, Handoff

_MODELS = {"request": Request, "handoff": Handoff, "archived": ArchivedHandoff}


def _erasure_of(kind: str, model) -> Callable[[object, str], set[str] | None]:
    def check(_truth, subject: str) -> set[str] | None:
        head, _, pk = subject.partition(":")
        if head != kind or not pk.isdigit():
            return None
        row = model.objects.filter(pk=int(pk)).values("erasure_id").first()
        return None if row is None else {str(row["erasure_id"] or "not erased")}

    return check


ERASURE_CHECKS = {f"{kind}.erased": _erasure_of(kind, model) for kind, model in _MODELS.items()}
