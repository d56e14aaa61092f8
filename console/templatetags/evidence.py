"""{% handoff_evidence handoff findings %}: the receiver's side of a handoff with who said it and when
(`reconciliation.selectors.evidence`), rendered by `outbox/_handoff_evidence.html`."""

from django import template
from django.utils.safestring import SafeString

from console import evidence_words
from console.claims import Claim, claim_span, handoff_subject, state_claim
from lib.escaped import escaped
from reconciliation.selectors.evidence import handoff_evidence as evidence_of

register = template.Library()


@register.inclusion_tag("outbox/_handoff_evidence.html")
def handoff_evidence(handoff, findings=()) -> dict:
    """`findings` are the page's live findings of the key, as rows with their `finding`."""
    live = [row["finding"] if isinstance(row, dict) else row for row in findings or ()]
    evidence = evidence_of(handoff, live)
    claim = None
    if handoff.is_delivered:
        claim = Claim("handoff.task_at_receiver", handoff_subject(handoff), evidence.task_answer)
    return {"handoff": handoff, "evidence": evidence, "task_claim": claim}


@register.simple_tag
def state_badge(handoff) -> str:
    """`<span class="state …">`: the handoff's state, or "Delivered, task gone at the receiver" (not green),
    with its claim `handoff.state`."""
    badge = evidence_words.state_badge(handoff)
    words = claim_span(badge[1], state_claim(handoff, badge))
    return SafeString(f'<span class="state {escaped(badge[0])}">{words}</span>')


@register.simple_tag
def work_cell(handoff) -> str:
    """The work in a list of steps, with its claim `handoff.work_status`: the status the receiver reported,
    `none`, or `gone` (the task is gone)."""
    words = evidence_words.work_cell(handoff)
    value = (
        "gone" if words == evidence_words.WORK_OF_A_GONE_TASK else (handoff.work_status or "none")
    )
    return claim_span(words, Claim("handoff.work_status", handoff_subject(handoff), value))
