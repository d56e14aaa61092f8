"""{% claimed words claim… %}: the words inside the claims a machine reads (`console/claims.py`); a claim may be
None, a `Claim`, or a list or dict of them."""

from django import template
from django.utils.html import format_html
from django.utils.timesince import timeuntil

from console.claims import Claim, claim_span, handoff_subject
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
    """A destination's state words (`DestinationSummary.state_words`) with the claim `destination.state`."""
    claim = Claim("destination.state", f"destination:{summary.name}", summary.state_kind)
    return claim_span(summary.state_words, claim)


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
    chosen = context.get("workspace")
    counted = [chosen] if chosen else sorted(context.get("scope") or [])
    subject = "health:" + ",".join(str(ws) for ws in counted)
    return claim_span(shown["text"], Claim(f"health.{name}", subject, str(shown["value"])))


@register.simple_tag
def incident_state(incident) -> str:
    """An incident's state in words, with its claim `incident.state`."""
    claim = Claim("incident.state", f"incident:{incident.pk}", incident.state)
    return claim_span(incident.get_state_display(), claim)


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
    return claim_attrs(Claim("request.state", f"request:{request_row.pk}", request_row.state))
