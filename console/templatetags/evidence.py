"""{% handoff_evidence handoff findings %}: the receiver's side of a handoff with who said it and when
(`reconciliation.selectors.evidence`), rendered by `outbox/_handoff_evidence.html`."""

from django import template

from reconciliation.selectors.evidence import handoff_evidence as evidence_of

register = template.Library()


@register.inclusion_tag("outbox/_handoff_evidence.html")
def handoff_evidence(handoff, findings=()) -> dict:
    """`findings` are the page's live findings of the key, as rows with their `finding`."""
    live = [row["finding"] if isinstance(row, dict) else row for row in findings or ()]
    return {"handoff": handoff, "evidence": evidence_of(handoff, live)}
