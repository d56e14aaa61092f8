"""What a handoff table says about each row's destination and findings: the destination's holds (every live
one and the next scheduled, in the words of `outbox/hold_lines.py`, the same as the destination's page) and
why a row needs a person when its own state does not say it (a live finding).

One query for the holds of every destination on the page and one for the findings: a table of 50 rows costs
the same as one row."""

from collections.abc import Iterable

from lib.row_urls import row_url
from outbox.hold_lines import DestinationHolds, destinations_holds
from outbox.models import Handoff
from outbox.redaction import redact
from reconciliation.selectors import live_findings


def handoff_rows(handoffs: list[Handoff], workspace_ids: Iterable[int]) -> list[Handoff]:
    """The rows of a handoff table, each with `.destination_holds` (its destination's holds when there is
    one live or scheduled, else None: only an open handoff waits for them) and `.finding_kinds` (the kinds of
    its key's live findings, the reason a delivered handoff needs a person). Two queries at most, whatever
    the number of rows. Each row also carries what its template would otherwise work out per row, at a cost
    that made most of a 50-row page's time (issue 40): `.detail_url` and `.client_name` (the payload's
    client name, masked as the payload is; "" when there is none)."""
    workspace_ids = list(workspace_ids)
    # Every row's destination, open or not: the page runs the same queries whatever its rows' states.
    holds = destinations_holds({h.destination for h in handoffs})
    kinds: dict[str, list[str]] = {}
    keys = [h.action_key for h in handoffs]
    if keys:
        for finding in live_findings(workspace_ids).filter(action_key__in=keys).order_by("kind"):
            kinds.setdefault(finding.action_key, []).append(finding.get_kind_display())
    for h in handoffs:
        h.destination_holds = shown_holds(h, holds.get(h.destination))
        h.finding_kinds = kinds.get(h.action_key, [])
        h.detail_url = row_url("outbox:detail", h.pk)
        h.client_name = _client_name(h.payload)
    return handoffs


def shown_holds(handoff: Handoff, holds: DestinationHolds | None) -> DestinationHolds | None:
    """Its destination's holds as a handoff's row and page show them: only an open handoff waits for them,
    and only when one is live or scheduled; else None."""
    return holds if handoff.is_open and holds is not None and holds.shown else None


def destination_held(holds: DestinationHolds | None) -> bool:
    """Whether the holds shown (`shown_holds`) have one live: the destination takes no call now."""
    return holds is not None and holds.held


def _client_name(payload) -> str:
    name = payload.get("client_name") if isinstance(payload, dict) else None
    return redact(str(name)) if name is not None and str(name).replace(" ", "") else ""
