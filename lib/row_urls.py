"""`row_url(name, pk)`: `reverse(name, args=(pk,))` for the URLs of a table's rows, reversed once per URL name.

A page of fifty handoffs links each row and offers up to three actions on it: reverse() per link cost a sixth of
the needs-attention page's CPU (issue 40). The URL is reversed once per name (and script prefix and URLconf,
which a request may change) with a mark no row has in place of the id; each row's id then takes the mark's
place. Only for URLs whose one argument is a row's integer id."""

from django.urls import get_script_prefix, get_urlconf, reverse

_MARK = "2147483647"
_patterns: dict[tuple, tuple[str, str]] = {}


def row_url(name: str, pk: int) -> str:
    key = (name, get_script_prefix(), get_urlconf())
    pattern = _patterns.get(key)
    if pattern is None:
        head, _mark, tail = reverse(name, args=(int(_MARK),)).rpartition(_MARK)
        pattern = _patterns[key] = (head, tail)
    return f"{pattern[0]}{pk}{pattern[1]}"
