"""Links to the lists behind a figure, with the lists' own filter names."""

from urllib.parse import urlencode

from django.urls import reverse


def _with_query(path: str, params: dict) -> str:
    query = urlencode({k: v for k, v in params.items() if v not in (None, "")})
    return path + (f"?{query}" if query else "")


def handoff_list_url(**params) -> str:
    """A link to the handoff list, with its filter names: state, failure_class, reason_code, workspace, owner, q."""
    return _with_query(reverse("outbox:list"), params)


def findings_url(**params) -> str:
    return _with_query(reverse("reconciliation:findings"), params)


def drilldown_url(name: str, workspace: int | None) -> str:
    return reverse("reconciliation:drilldown", args=[name]) + (
        f"?workspace={workspace}" if workspace else ""
    )
