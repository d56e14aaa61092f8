"""The nav's links (only the pages the user may use) and the page a 403 refuses."""

import functools

from django import template
from django.urls import get_script_prefix, get_urlconf, reverse

from approvals import selectors
from outbox.redaction import redact
from reconciliation.selectors import COUNT_CAP

register = template.Library()

# Nav links with a live figure beside them: the URL that answers it.
COUNTS = {"incidents:list": "incidents:open_count"}


def _reversed(name: str) -> str:
    """`reverse(name)`, once per name, script prefix and URLconf (a request may change the last two): the
    nav's links reversed at every page were a twentieth of a page's CPU (issue 40)."""
    return _reversed_in(name, get_script_prefix(), get_urlconf())


@functools.cache
def _reversed_in(name: str, _prefix: str, _urlconf) -> str:
    return reverse(name)


@register.simple_tag(takes_context=True)
def console_links(context) -> list[dict]:
    request = context.get("request")
    user = context.get("user")
    if request is None or user is None or not user.is_authenticated:
        return []
    nav = context.get("nav")
    # The workspace summary, when the view passed one, already holds the roles: no extra query.
    roles = {role for ws in nav for role in ws["roles"]} if nav else None
    current = getattr(getattr(request, "resolver_match", None), "view_name", None)
    return [
        {
            **page,
            "url": _reversed(page["url_name"]),
            "current": page["url_name"] == current,
            # A figure beside the link, fetched after the page (no query of its own on every page).
            "count_url": _reversed(COUNTS[page["url_name"]]) if page["url_name"] in COUNTS else "",
        }
        for page in selectors.pages_for(user, roles)
    ]


@register.simple_tag(takes_context=True)
def refused_page(context) -> dict | None:
    request = context.get("request")
    return selectors.page_named(
        getattr(getattr(request, "resolver_match", None), "view_name", None)
    )


@register.filter
def redacted(value):
    """A payload value shown outside the payload itself (a client name in a row) goes through the same
    redaction as the payload: an e-mail address or a secret inside it is masked."""
    return redact(value)


@register.filter
def bounded_count(value):
    """A count that stopped past the cap (`reconciliation.selectors.COUNT_CAP`): "999+" above it."""
    return f"{COUNT_CAP}+" if isinstance(value, int) and value > COUNT_CAP else value
