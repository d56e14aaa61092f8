"""The truth oracle: every claim a page makes (`data-claim`, `data-subject`, `data-value`, made by
`console/claims.py`) checked against the ground truth (`tests/oracle/truth.py`).

A claim fails when its value is not among the true ones, when its name has no truth check (a new claim
needs one here), when its subject does not exist, and when two screens of one moment state different values
for the same claim about the same subject. Each failure names the screen, the words, the claim and the
truth."""

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from html.parser import HTMLParser

from tests.oracle.counts import COUNT_CHECKS
from tests.oracle.erasures import ERASURE_CHECKS
from tests.oracle.health_truths import HEALTH_TRUTHS, health_subject
from tests.oracle.records import RECORD_TRUTHS, mailbox_recipient
from tests.oracle.truth import Truth

HEALTH_STATE_COUNTS = ("pending", "in_flight", "uncertain", "needs_attention")
VOID = frozenset({"br", "hr", "img", "input", "meta", "link", "source", "wbr", "col", "area"})


@dataclass(frozen=True)
class SeenClaim:
    url: str
    name: str
    subject: str
    value: str
    words: str


@dataclass(frozen=True)
class Problem:
    claim: SeenClaim
    truth: str

    def __str__(self) -> str:
        c = self.claim
        return (
            f"{c.url}: {c.name} of {c.subject} = {c.value!r}, but the truth is {self.truth}; "
            f"the words: {c.words!r}"
        )


class _ClaimParser(HTMLParser):
    """Collects each element with `data-claim` and the text inside it."""

    def __init__(self, url: str):
        super().__init__(convert_charrefs=True)
        self.url, self.claims, self.open = url, [], []

    def handle_starttag(self, tag, attrs):
        if tag in VOID:
            return
        attributes = dict(attrs)
        for record in self.open:
            if record["tag"] == tag:
                record["depth"] += 1
        if "data-claim" in attributes:
            self.open.append({"tag": tag, "depth": 1, "attrs": attributes, "text": []})

    def handle_startendtag(self, tag, attrs):
        pass

    def handle_endtag(self, tag):
        for record in list(self.open):
            if record["tag"] == tag:
                record["depth"] -= 1
                if record["depth"] == 0:
                    self.open.remove(record)
                    self._close(record)

    def handle_data(self, data):
        for record in self.open:
            record["text"].append(data)

    def _close(self, record):
        a = record["attrs"]
        words = " ".join("".join(record["text"]).split())
        self.claims.append(
            SeenClaim(
                self.url, a["data-claim"], a.get("data-subject", ""), a.get("data-value", ""), words
            )
        )

    def close(self):
        super().close()
        for record in self.open:
            self._close(record)
        self.open = []


# A test reads the claims of the pages it rendered several times (checked, then looked for): each page is
# parsed once (the parse was a third of an oracle test's CPU).
@lru_cache(maxsize=512)
def claims_in(url: str, html: str) -> tuple[SeenClaim, ...]:
    parser = _ClaimParser(url)
    parser.feed(html)
    parser.close()
    return tuple(parser.claims)


def _id(subject: str, kind: str) -> str | None:
    head, _, rest = subject.partition(":")
    return rest if head == kind and rest else None


def _handoff(attr: str) -> Callable[[Truth, str], set[str] | None]:
    def check(truth: Truth, subject: str) -> set[str] | None:
        pk = _id(subject, "handoff")
        found = truth.handoff(int(pk)) if pk and pk.isdigit() else None
        return None if found is None else getattr(found, attr)()

    return check


def _handoff_owner(truth: Truth, subject: str) -> set[str] | None:
    pk = _id(subject, "handoff")
    return truth.handoff_owner(int(pk)) if pk and pk.isdigit() and truth.handoff(int(pk)) else None


def _request_state(truth: Truth, subject: str) -> set[str] | None:
    pk = _id(subject, "request")
    row = truth.request(int(pk)) if pk and pk.isdigit() else None
    return None if row is None else {row["state"]}


def _request_owner(truth: Truth, subject: str) -> set[str] | None:
    pk = _id(subject, "request")
    return truth.request_owner(int(pk)) if pk and pk.isdigit() and truth.request(int(pk)) else None


def _destination(method: str) -> Callable[[Truth, str], set[str] | None]:
    def check(truth: Truth, subject: str) -> set[str] | None:
        name = _id(subject, "destination")
        return getattr(truth, method)(name) if name else None

    return check


def _health_count(state: str) -> Callable[[Truth, str], set[str] | None]:
    def check(truth: Truth, subject: str) -> set[str] | None:
        counted = _id(subject, "health")
        workspaces = [int(ws) for ws in counted.split(",")] if counted else []
        return truth.health_count(state, workspaces)

    return check


def _incident_state(truth: Truth, subject: str) -> set[str] | None:
    pk = _id(subject, "incident")
    return truth.incident_state(int(pk)) if pk and pk.isdigit() else None


def _retries_exhausted(truth: Truth, subject: str) -> set[str] | None:
    counted = _id(subject, "health")
    return truth.retries_exhausted([int(ws) for ws in counted.split(",")] if counted else [])


def _delivered_in_window(figure: str) -> Callable[[Truth, str], set[str] | None]:
    def check(truth: Truth, subject: str) -> set[str] | None:
        counted = _id(subject, "health")
        workspaces = [int(ws) for ws in counted.split(",")] if counted else []
        return truth.delivered_in_window(figure, workspaces)

    return check


def _record(name: str, truth_of: Callable[[int], set[str] | None]):
    kind = name.split(".", 1)[0]

    def check(truth: Truth, subject: str) -> set[str] | None:
        pk = _id(subject, kind)
        return truth_of(int(pk)) if pk and pk.isdigit() else None

    return check


def _health_figure(figure: str) -> Callable[[Truth, str], set[str] | None]:
    def check(truth: Truth, subject: str) -> set[str] | None:
        parsed = health_subject(subject)
        return None if parsed is None else HEALTH_TRUTHS[figure](truth, *parsed)

    return check


def _destination_limit(field: str) -> Callable[[Truth, str], set[str] | None]:
    def check(truth: Truth, subject: str) -> set[str] | None:
        name = _id(subject, "destination")
        if not name:
            return None
        row = truth.destination(name)
        # No health row yet: nothing limits it.
        return {"unlimited" if row is None or row[field] is None else str(row[field])}

    return check


def _mail_to(truth: Truth, subject: str) -> set[str] | None:
    message_id = _id(subject, "mail")
    return mailbox_recipient(message_id) if message_id else None


# Each claim's truth: the values that are true now, or None when its subject does not exist.
CHECKS: dict[str, Callable[[Truth, str], set[str] | None]] = {
    "handoff.state": _handoff("state"),
    "handoff.outcome_evidence": _handoff("outcome_evidence"),
    "handoff.task_at_receiver": _handoff("task_at_receiver"),
    "handoff.work": _handoff("work"),
    "handoff.work_status": _handoff("work_status"),
    "handoff.next_owner": _handoff_owner,
    "handoff.next_attempt_at": _handoff("next_attempt_at"),
    "handoff.assignee": _handoff("assignee"),
    "handoff.held": _handoff("held"),
    "request.state": _request_state,
    "request.next_owner": _request_owner,
    "destination.state": _destination("destination_state"),
    "destination.next_probe_at": _destination("next_probe_at"),
    "incident.state": _incident_state,
    "health.retry_exhausted": _retries_exhausted,
    **{
        f"health.{figure}": _delivered_in_window(figure)
        for figure in ("completed", "work_failed", "cases_completed")
    },
    **{f"health.{state}": _health_count(state) for state in HEALTH_STATE_COUNTS},
    **ERASURE_CHECKS,
    **{name: _record(name, truth_of) for name, truth_of in RECORD_TRUTHS.items()},
    **{f"health.{figure}": _health_figure(figure) for figure in HEALTH_TRUTHS},
    "destination.max_concurrency": _destination_limit("max_concurrency"),
    "destination.max_requests_per_second": _destination_limit("max_requests_per_second"),
    "mail.to": _mail_to,
    **COUNT_CHECKS,
}


# The phrases that say each kind of outcome evidence (`console/evidence_words.py`): a claim's words that say
# another kind's phrase and not its own contradict the claim beside them.
OUTCOME_PHRASES = {
    "receipt": "receipt validated",
    "lookup": "found by lookup",
    "repair": "settled by a person",
    "unrecorded": "is not recorded",
}


def _words_contradict(claim: SeenClaim) -> str | None:
    if claim.name != "handoff.outcome_evidence":
        return None
    own = OUTCOME_PHRASES.get(claim.value, "")
    said = [kind for kind, phrase in OUTCOME_PHRASES.items() if phrase in claim.words]
    if said and own not in claim.words:
        return f"at odds with its own words, which say {', '.join(said)}"
    return None


def _check(claim: SeenClaim, truth: Truth, known: dict) -> Problem | None:
    contradiction = _words_contradict(claim)
    if contradiction:
        return Problem(claim, contradiction)
    check = CHECKS.get(claim.name)
    if check is None:
        return Problem(claim, "unknown: no truth check for this claim (add one to tests/oracle)")
    fact = (claim.name, claim.subject)
    if fact not in known:
        known[fact] = check(truth, claim.subject)
    true = known[fact]
    if true is None:
        return Problem(claim, f"no such subject {claim.subject!r}")
    if claim.value not in true:
        shown = " or ".join(sorted(true)) if true else "that the records contradict each other"
        return Problem(claim, shown)
    return None


def check_pages(pages: dict[str, str], truth: Truth) -> tuple[list[Problem], int]:
    """Every claim of `pages` ({url: html}) against `truth`, then across the pages; (problems, claims seen)."""
    seen = [c for url, html in pages.items() for c in claims_in(url, html)]
    # One moment: the same claim about the same subject, on many screens, has one truth, read once.
    known: dict[tuple[str, str], set[str] | None] = {}
    problems = [p for p in (_check(c, truth, known) for c in seen) if p is not None]
    problems += _disagreements(seen)
    return problems, len(seen)


def _disagreements(seen: Iterable[SeenClaim]) -> list[Problem]:
    by_fact = defaultdict(list)
    for c in seen:
        by_fact[(c.name, c.subject)].append(c)
    out = []
    for claims in by_fact.values():
        values = {c.value for c in claims}
        if len(values) > 1:
            first = claims[0]
            other = next(c for c in claims if c.value != first.value)
            out.append(Problem(other, f"{first.value!r} on {first.url} (the screens disagree)"))
    return out


def assert_pages_true(pages: dict[str, str], truth: Truth, *, context: str = "") -> int:
    """Fails with every false claim; returns how many claims were checked."""
    problems, count = check_pages(pages, truth)
    if problems:
        lines = "\n".join(f"  {p}" for p in problems[:40])
        raise AssertionError(f"{len(problems)} false claims{context}:\n{lines}")
    return count
