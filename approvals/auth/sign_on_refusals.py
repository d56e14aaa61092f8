"""A refused first sign-on, remembered in the browser's session for ten minutes, so that the sign-in page
can say why and, where the refusal names an existing account, let its holder link it with its password.

The session holds the identity the provider vouched for at that moment (issuer, subject); nothing else
proves it later, so it is kept briefly and used once.
"""

import time

from approvals.errors import IdentityRefused

SESSION_KEY = "sign_on_refusal"
KEEP_SECONDS = 600


def sign_on_refusal_remember(request, *, claims: dict, refusal: IdentityRefused) -> None:
    if request is None:
        return
    request.session[SESSION_KEY] = {
        "issuer": claims["iss"],
        "subject": claims["sub"],
        "reason": str(refusal),
        "existing": refusal.existing,
        "until": time.time() + KEEP_SECONDS,
    }


def sign_on_refusal(request) -> dict | None:
    """The refusal of this browser's last sign-on, if it is recent; None otherwise."""
    found = request.session.get(SESSION_KEY)
    if not isinstance(found, dict) or found.get("until", 0) < time.time():
        return None
    return found


def sign_on_refusal_forget(request) -> None:
    request.session.pop(SESSION_KEY, None)
