"""{% claimed words claim… %}: the words inside the claims a machine reads (`console/claims.py`); a claim may be
None, a `Claim`, or a list or dict of them."""

from datetime import timedelta

from django import template
from django.template.loader import render_to_string
from django.utils.html import format_html
from django.utils.timesince import timeuntil

from console.claims import Claim, claim_span, handoff_subject, record_claim, record_words
from console.templatetags.health_format import duration
from outbox.page_clock import page_now

register = template.Library()


def _flat(items) -> list[Claim]:
    out = []
    for item in items:
        if isinstance(item, Claim):
            out.append(item)
        elif isinstance(item, dict):
            out.extend(_flat(item.values()))
        elif isinstance(item, list | tuple):
            out.extend(_flat(item))
    return out


@register.simple_tag
def claimed(words, *claims) -> str:
    return claim_span(words, *_flat(claims))


@register.simple_tag
def claim_attrs(claim) -> str:
    """The claim as attributes of an element that holds the words already (nothing for None)."""
    if claim is None:
        return ""
    return format_html(
        'data-claim="{}" data-subject="{}" data-value="{}"', claim.name, claim.subject, claim.value
    )


@register.simple_tag
def destination_state(summary) -> str:
    """A destination's state with the claim `destination.state`: its holds as every screen lists them
    (`outbox/_holds.html`: each live hold, then the next scheduled) when it has any, else its state words
    (`DestinationSummary.state_words`)."""
    claim = Claim("destination.state", f"destination:{summary.name}", summary.state_kind)
    if not summary.holds.shown:
        return claim_span(summary.state_words, claim)
    holds = render_to_string("outbox/_holds.html", {"holds": summary.holds})
    return format_html("<div {}>{}</div>", claim_attrs(claim), holds)


@register.simple_tag
def next_probe_at(health) -> str:
    """When a paused destination is probed next, as the screens write it, with its claim: a time already
    past on the database's clock (`page_now`: no query) reads "due now", never as a time gone by (issue 36,
    item 8)."""
    moment = health.next_probe_at
    if moment is None:
        words = "(no time set)"
    elif moment <= page_now():
        words = "(due now)"
    else:
        words = f"at {moment:%H:%M:%S} UTC"
    value = moment.isoformat() if moment else "none"
    return claim_span(
        words, Claim("destination.next_probe_at", f"destination:{health.name}", value)
    )


@register.simple_tag(takes_context=True)
def figure(context, figures: dict, name: str) -> str:
    """A count on Health (`figures[name]`: its value and text) with its claim `health.<name>` about the
    workspaces counted: the chosen one, else every one of the viewer's."""
    shown = figures[name]
    subject = health_subject(context)
    return claim_span(shown["text"], Claim(f"health.{name}", subject, str(shown["value"])))


def health_subject(context, *parts) -> str:
    """What a Health figure is about: the workspaces counted (the chosen one, else every one of the
    viewer's), then what it is broken down by (`health:7,8|onboarding|3`)."""
    chosen = context.get("workspace")
    counted = [chosen] if chosen else sorted(context.get("scope") or [])
    return "|".join(["health:" + ",".join(str(ws) for ws in counted), *map(str, parts)])


@register.simple_tag(takes_context=True)
def figure_seconds(context, figures: dict, name: str) -> str:
    """A time on Health (`figures[name]["value"]`, seconds or None) in the words `duration` picks, with its
    claim `health.<name>`: the seconds as the words round them, or `none`."""
    value = figures[name]["value"]
    shown = "none" if value is None else str(int(round(float(value))))
    return claim_span(duration(value), Claim(f"health.{name}", health_subject(context), shown))


@register.simple_tag(takes_context=True)
def figure_age(context, figures: dict, name: str) -> str:
    """The age of the oldest row of a state on Health, in the words `duration` picks, with its claim
    `health.<name>` stating since when (ISO 8601 on the database's clock, `none` when no row): the age is
    the page's moment (`now`) minus that time, so the claim does not depend on when it is checked."""
    value = figures[name]["value"]
    since = "none" if value is None else (context["now"] - timedelta(seconds=value)).isoformat()
    return claim_span(duration(value), Claim(f"health.{name}", health_subject(context), since))


@register.simple_tag(takes_context=True)
def health_claim(context, words, name: str, value, *parts) -> str:
    """A figure of one row of a Health table (a failure rate's workflow and rules, a finding's kind), with
    its claim `health.<name>` about the workspaces counted and the row (`parts`)."""
    claim = Claim(f"health.{name}", health_subject(context, *parts), str(value))
    return claim_span(words, claim)


@register.simple_tag
def destination_limit(health, field: str, used) -> str:
    """How much of a destination's limit (`max_concurrency`, `max_requests_per_second`) is in use ("2 of 5",
    "0 of unlimited"), with the claim `destination.<field>`: the limit, or `unlimited`."""
    value = getattr(health, field, None)
    shown = "unlimited" if value is None else str(value)
    words = f"{used} of {shown}"
    if health is None:
        return words  # no health row yet: nothing limits it, and there is no record to claim about
    return claim_span(words, Claim(f"destination.{field}", f"destination:{health.name}", shown))


@register.simple_tag
def next_attempt(handoff) -> str:
    """When a handoff in backoff is tried again, as its page writes it, with its claim."""
    moment = handoff.next_attempt_at
    words = format_html("{} (in {})", f"{moment:%Y-%m-%d %H:%M:%S}", timeuntil(moment, page_now()))
    claim = Claim("handoff.next_attempt_at", handoff_subject(handoff), moment.isoformat())
    return claim_span(words, claim)


@register.simple_tag
def assignee(handoff) -> str:
    """Who the handoff is assigned to ("nobody"), with its claim `handoff.assignee`."""
    owner = handoff.owner.get_username() if handoff.owner_id else ""
    claim = Claim("handoff.assignee", handoff_subject(handoff), owner or "nobody")
    return claim_span(owner or "nobody", claim)


@register.simple_tag
def request_claim(request_row) -> str:
    """The claim `request.state` of a request listed by its state, as attributes of its row."""
    return claim_attrs(record_claim(request_row, "state"))


@register.simple_tag
def stated(record, field: str, words=None) -> str:
    """One of a record's fields in its words (its label, its value, or `words`) with its claim
    (`console.claims.record_claim`: `finding.status`, `run.keys_compared`, `replay.state`, …)."""
    return record_words(record, field, words)


@register.simple_tag
def counted(words, name: str, value, kind: str, pk) -> str:
    """A count on a screen (`words`) with its claim `name` about `<kind>:<pk>` (`workspace:7`, …)."""
    return claim_span(words, Claim(name, f"{kind}:{pk}", str(value)))


@register.simple_tag
def recommended(handoff, guidance) -> str:
    """The safest next step's headline (`outbox.guidance.next_step`) with its claim `handoff.recommended`:
    the action the guidance recommends (`retry`, `reconcile`, `repair`, …), or `none`."""
    claim = Claim("handoff.recommended", handoff_subject(handoff), guidance.recommended or "none")
    return claim_span(guidance.headline, claim)


@register.simple_tag
def agreement_count(agreement, field: str, workspace_id, rule_version) -> str:
    """One of a rule version's observation counts (`approvals.agreement.Agreement`: observed, recorded,
    agree, disagree, unexplained, not_recorded) with its claim `observation.<field>` about
    `observation:<workspace>|<rule version>`."""
    value = getattr(agreement, field)
    subject = f"observation:{workspace_id}|{rule_version}"
    return claim_span(value, Claim(f"observation.{field}", subject, str(value)))


@register.simple_tag
def export_offered(user, workspace) -> str:
    """A workspace the audit export's form offers the viewer, as attributes of its option: the claim
    `audit.exportable` (`yes`) about `user:<username>|workspace:<pk>`."""
    subject = f"user:{user.get_username()}|workspace:{workspace.pk}"
    return claim_attrs(Claim("audit.exportable", subject, "yes"))
