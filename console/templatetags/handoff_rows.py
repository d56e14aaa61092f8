"""{% handoff_row h %}: one row of a handoff table (the list, Home's "need a person", one row again after its
quick action), drawn in Python.

The row was a template fragment of about fifty variable lookups, eight tags and a form per quick action; at
fifty rows a page that was most of the list's CPU (issue 40: 20 operators queued on it). Here each cell is one
f-string with its values escaped as a template escapes them, and the claims come from the same tags the
template called (`state_badge`, `stated`, `assignee`), so that words and claims stay made in one place. The
HTML is the fragment's, byte for byte, whitespace included (tests/console/test_handoff_row_html.py)."""

import functools

from django import template
from django.template.loader import get_template
from django.utils.safestring import SafeString, mark_safe
from django.utils.timesince import TIME_STRINGS, timesince, timeuntil
from django.utils.translation import get_language

from console.evidence_words import choice_words
from console.templatetags.claims import assignee, stated
from console.templatetags.evidence import state_badge
from lib.escaped import escaped as _e

register = template.Library()


def _key_cell(h) -> str:
    client = f" · {_e(h.client_name)}" if h.client_name else ""
    return (
        f'<td data-label="Action key"><a href="{_e(h.detail_url)}"><code>{_e(h.action_key)}</code></a>'
        f"<br>\n          <small>workspace {_e(h.workspace_id)} · {_e(h.source_ref)}{client}</small></td>"
    )


def _holds(holds) -> str:
    """Its destination's holds (outbox/hold_lines.py): while one is live the retry time would not hold."""
    if not holds:
        return ""
    listed = get_template("outbox/_holds.html").render({"holds": holds})
    return (
        f'\n          <div class="destination-holds" data-held="{"true" if holds.held else "false"}"><small>'
        f"Destination {_e(holds.name)}:</small> {listed}</div>"
    )


def _retry(h) -> str:
    held = h.destination_holds.held if h.destination_holds else False
    if held or not h.retry_scheduled:
        return ""
    if h.in_backoff:
        return f"<br><small>retry in {_e(_timeuntil(h.next_attempt_at))}</small>"
    return "<br><small>retry due now</small>"


def _state_cell(h) -> str:
    mark = (
        f'<div class="case-hold"><small>{_e(h.case_hold_mark)}</small></div>'
        if h.case_hold_mark
        else ""
    )
    return (
        f'<td data-label="State">{state_badge(h)}\n          {mark}\n          '
        f"{_holds(h.destination_holds)}\n          {_retry(h)}</td>"
    )


def _failure_cell(h) -> str:
    words = (
        f"{_e(choice_words(h, 'failure_class'))}: {_e(h.reason_code)}" if h.failure_class else ""
    )
    if h.finding_kinds:
        found = ", ".join(_e(kind) for kind in h.finding_kinds).lower()
        words += f"{'<br>' if h.failure_class else ''}Reconciliation found: {found}"
    elif not h.failure_class:
        words += "—"
    return f'<td data-label="Last failure">{words}</td>'


class _Counted:
    """A unit of `timesince`'s words ("%(num)d minutes") made once per language and number: through Django's
    lazy `ngettext` each row's age cost a twelfth of a list page's CPU (issue 40). The words are Django's."""

    def __init__(self, unit: str) -> None:
        self.unit = unit

    def __mod__(self, values: dict) -> str:
        return _counted(get_language(), self.unit, values["num"])


@functools.lru_cache(maxsize=10_000)
def _counted(language: str, unit: str, num: int) -> str:
    return TIME_STRINGS[unit] % {"num": num}


_UNITS = {unit: _Counted(unit) for unit in TIME_STRINGS}


def _timesince(moment) -> str:
    """The `timesince` filter: "" for no time or one it cannot compare."""
    try:
        return timesince(moment, time_strings=_UNITS) if moment else ""
    except (ValueError, TypeError):
        return ""


def _timeuntil(moment) -> str:
    """The `timeuntil` filter: "" for no time or one it cannot compare."""
    try:
        return timeuntil(moment, time_strings=_UNITS) if moment else ""
    except (ValueError, TypeError):
        return ""


def _actions(h, context) -> str:
    if h.workspace_id not in (context.get("operator_ws") or ()):
        return ""
    token = context.get("csrf_token")
    csrf = ""
    if token and token != "NOTPROVIDED":  # noqa: S105 - Django's mark of no token, not a secret
        csrf = f'<input type="hidden" name="csrfmiddlewaretoken" value="{_e(token)}">'
    forms = "".join(
        f'\n              <form method="post" action="{_e(a.url)}" hx-post="{_e(a.url)}"\n'
        f'                    hx-target="closest tr" hx-swap="outerHTML">{csrf}\n'
        '                <input type="hidden" name="render" value="row">\n'
        f'                <button type="submit">{_e(a.label)}</button>\n              </form>\n            '
        for a in h.quick_actions
    )
    return f"\n            {forms}\n          "


def _result(h, result) -> str:
    if not result:
        return ""
    link = (
        f'<a href="{_e(h.detail_url)}">Open it to reconcile or confirm</a>'
        if result.get("confirm_risk")
        else ""
    )
    return (
        f'<p class="result {_e(result.get("level", ""))}" role="status">{_e(result.get("text", ""))}'
        f"\n            {link}</p>"
    )


@register.simple_tag(takes_context=True)
def handoff_row(context, h) -> SafeString:
    """The `<tr>` of handoff `h`, read by `console.views.handoff_list.table_rows`; the context gives
    `operator_ws` (whose rows offer their quick actions), the page's CSRF token and `row_result` (the answer
    to a quick action, on the row it re-renders)."""
    pending_age = _e(_timesince(h.created_at)) if h.is_open else "—"
    return mark_safe(  # noqa: S308 - every value above is escaped as the template escaped it
        f'<tr id="handoff-{_e(h.pk)}">\n        {_key_cell(h)}\n        {_state_cell(h)}\n'
        f'        <td data-label="Attempts">{stated(h, "attempts_made")}</td>\n'
        f"        {_failure_cell(h)}\n"
        f'        <td data-label="Destination id" class="wrap">{_e(h.destination_id or "—")}</td>\n'
        f'        <td data-label="Pending age">{pending_age}</td>\n'
        f'        <td data-label="Owner">{assignee(h)}</td>\n'
        f'        <td data-label="Actions" class="row-actions">\n          {_actions(h, context)}\n'
        f"          {_result(h, context.get('row_result'))}\n        </td>\n      </tr>"
    )
