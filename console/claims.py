"""Claims a machine can read: each fact a screen states about a request, step, handoff, destination or
incident, beside its words, as `<span data-claim="…" data-subject="…" data-value="…">words</span>`. The
code that picks the words makes the claim (the choosers of `console/evidence_words.py`, the lines of
`console/step_status.py` and `console/request_status.py`), so words and claim cannot drift apart; the truth
oracle (`tests/oracle/`) checks every claim against the databases, the receiver's records and the evidence
recorded. docs/console.md lists each claim with the truth it is checked against."""

from collections.abc import Iterable
from dataclasses import dataclass

from django.utils.safestring import SafeString

# The choosers are called through their module, so that a claim is always made by the chooser the words
# are made by (a test that makes a chooser lie makes the words and the claim lie together).
from console import evidence_words
from console.evidence_words import SYSTEM, WORKERS
from lib.escaped import escaped
from outbox.models import Handoff, HandoffState


@dataclass(frozen=True)
class Claim:
    name: str
    subject: str
    value: str


def claim_span(words: object, *claims: "Claim | None") -> SafeString:
    """`words` inside one span per claim (None skipped); the words escaped as any template value. What
    `format_html` wrote, in f-strings (`lib.escaped`): a list page draws a few hundred of them."""
    html = escaped(words)
    for claim in claims:
        if claim is not None:
            html = (
                f'<span data-claim="{escaped(claim.name)}" data-subject="{escaped(claim.subject)}" '
                f'data-value="{escaped(claim.value)}">{html}</span>'
            )
    return SafeString(html)


def owner_kind(owner: str) -> str:
    """Who owns the next step, as a kind, read from the owner words a line was given."""
    if not owner:
        return "none"
    if owner == SYSTEM or owner.startswith("the system"):
        return "system"
    if owner == WORKERS:
        return "workers"
    if owner.startswith("the approvers"):
        return "approvers"
    if owner == "you":
        return "requester"
    return "operator" if "operator" in owner else f"unknown ({owner})"


def handoff_subject(handoff: Handoff) -> str:
    return f"handoff:{handoff.pk}"


def state_claim(handoff: Handoff, badge: tuple[str, str] | None = None) -> Claim:
    """The state a badge shows (`state_badge` chooses): a state, or `task_gone`. `badge`: what the chooser
    already said of this handoff, when the caller asked it for the words."""
    css = (badge or evidence_words.state_badge(handoff))[0]
    return Claim("handoff.state", handoff_subject(handoff), css)


def handoff_claims(handoff: Handoff, findings: Iterable = (), repairs: Iterable = ()) -> dict:
    """The claims of a handoff's page, by short name: its state, and once delivered how the outcome is known,
    whether the task is at the receiver now and what is known of the work."""
    findings, repairs, subject = list(findings), list(repairs), handoff_subject(handoff)
    there = evidence_words.task_now(handoff, findings, repairs)
    # The page's state words ask `task_now` with the page's findings and repairs, as this does.
    state = "task_gone" if there is not None and not there.found else handoff.state
    claims = {"state": Claim("handoff.state", subject, state)}
    if handoff.is_open:
        # Whether an operator holds its case (`outbox/models/case_holds.py`): the claim leaves it out.
        claims["held"] = Claim("handoff.held", subject, "yes" if handoff.is_held else "no")
    if handoff.state != HandoffState.DELIVERED:
        return claims
    how = evidence_words.outcome_evidence(handoff, repairs)
    claims["outcome_evidence"] = Claim("handoff.outcome_evidence", subject, how)
    claims["task"] = Claim("handoff.task_at_receiver", subject, "yes" if there.found else "no")
    claims["work"] = Claim("handoff.work", subject, evidence_words.work_known(handoff, repairs))
    return claims


# The kind a record's claims are named by: `<kind>.<field>` about `<kind>:<pk>` (`record_claim`).
RECORD_KINDS = {
    "approvals.request": "request",
    "approvals.triggerrecord": "trigger",
    "outbox.archivedhandoff": "archived",
    "outbox.handoff": "handoff",
    "outbox.attempt": "attempt",
    "outbox.handoffevent": "handoff_event",
    "outbox.bulkjob": "bulk_job",
    "outbox.destinationconfig": "destination_config",
    "reconciliation.finding": "finding",
    "incidents.incident": "incident",
    "reconciliation.reconciliationrun": "run",
    "incidents.replay": "replay",
    "incidents.replayitem": "replay_item",
}


def record_claim(record, field: str) -> Claim:
    """What a screen states of one of a record's fields: the value it holds."""
    kind = RECORD_KINDS[record._meta.label_lower]
    return Claim(f"{kind}.{field}", f"{kind}:{record.pk}", claim_value(getattr(record, field)))


def claim_value(value: object) -> str:
    """A stored value as a claim states it: a time in ISO 8601, a user by name, a yes/no as true/false."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if hasattr(value, "get_username"):
        return value.get_username()
    return str(value)


def record_words(record, field: str, words: object = None) -> SafeString:
    """A record's field in its words (`words`, else its choice's label, else its value) inside its claim."""
    if words is None:
        display = getattr(record, f"get_{field}_display", None)
        words = display() if display is not None else getattr(record, field)
    return claim_span(words, record_claim(record, field))


def mode_claim(workflow: str, mode: str) -> Claim:
    """The claim `workflow.mode`: the workflow's mode as the screen words it (docs/console.md)."""
    return Claim("workflow.mode", f"workflow:{workflow}", mode)


def owner_claim(subject: str, owner: str) -> Claim:
    return Claim(f"{subject.split(':', 1)[0]}.next_owner", subject, owner_kind(owner))
