"""What every console page's header shows, computed once per page and only if the page draws it."""

from django.http import HttpRequest
from django.utils.functional import SimpleLazyObject

from approvals.auth.backends import password_changeable
from console.selectors import console_nav


def nav(request: HttpRequest) -> dict:
    """The signed-in user's workspaces and what waits for them (`console_nav`). Lazy: a page that never
    draws the header (a JSON answer, an admin page) runs none of its queries."""
    user = getattr(request, "user", None)
    return {
        "nav": SimpleLazyObject(lambda: console_nav(user) if user is not None else []),
        "password_changeable": user is not None and password_changeable(user),
    }
