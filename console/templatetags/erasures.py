"""{% erased_notice record %}: where a request's, a handoff's or an archived handoff's personal data was
erased on request, the line "Personal data erased on … by …, reason …" with its claim (`<kind>.erased`, the
erasure's id, checked by the oracle against the record's mark). Nothing for a record not erased."""

from django import template
from django.utils.html import format_html

from console.claims import RECORD_KINDS, Claim, claim_span

register = template.Library()


def erasure_claim(record) -> Claim | None:
    if record is None or not getattr(record, "erasure_id", None):
        return None
    kind = RECORD_KINDS[record._meta.label_lower]
    return Claim(f"{kind}.erased", f"{kind}:{record.pk}", str(record.erasure_id))


@register.simple_tag
def erased_notice(record) -> str:
    claim = erasure_claim(record)
    if claim is None:
        return ""
    return format_html(
        '<p class="erased" role="note">{}</p>', claim_span(record.erasure.words, claim)
    )
