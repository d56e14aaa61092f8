"""{% handoff_evidence handoff findings %}: the receiver's side of a handoff with who said it and when
(`reconciliation.selectors.evidence`), rendered by `outbox/_handoff_evidence.html`."""

from django import template
from django.utils.html import format_html

from console.evidence_words import state_badge as badge_of
from console.evidence_words import work_cell as work_of
from reconciliation.selectors.evidence import handoff_evidence as evidence_of

register = template.Library()


@register.inclusion_tag("outbox/_handoff_evidence.html")
def handoff_evidence(handoff, findings=()) -> dict:
    """`findings` are the page's live findings of the key, as rows with their `finding`."""
    live = [row["finding"] if isinstance(row, dict) else row for row in findings or ()]
    return {"handoff": handoff, "evidence": evidence_of(handoff, live)}


@register.simple_tag
def state_badge(handoff) -> str:
    """`<span class="state …">`: the handoff's state, or "Delivered, task gone at the receiver" (not green)."""
    css, words = badge_of(handoff)
    return format_html('<span class="state {}">{}</span>', css, words)


@register.simple_tag
def work_cell(handoff) -> str:
    return work_of(handoff)
