"""Two password validators of our own (AUTH_PASSWORD_VALIDATORS, docs/security.md "Passwords").

`ContextWordsValidator` refuses a new password holding a word of this product's context (ASVS 6.1.2, 6.2.11):
the product's and company's names, every workspace's name, the role names, and the person's own names.
`BreachedPasswordValidator` asks Have I Been Pwned's range API whether the password was in a breach (6.2.12)
with k-anonymity: only the first five hex digits of its SHA-1 leave the host, with `Add-Padding: true` so
that the answer's size says nothing either; the rest of the hash is compared here. An unreachable service
refuses the password (fail closed), saying so: a password lives for years, choosing it a minute later
costs little.
"""

import hashlib
import logging
import re
import unicodedata

import httpx
from django.conf import settings
from django.core.exceptions import ValidationError

from approvals.models import Role, Workspace

log = logging.getLogger(__name__)

# A word shorter than this would refuse too much ("ops" in "topsoil"); the person's names count from 3.
SHORTEST_WORD = 4
SHORTEST_OWN_NAME = 3


def folded(text: str) -> str:
    """Lower case, compatibility-normalised, letters and digits only: "Hand-Off" and "handoff" match."""
    text = unicodedata.normalize("NFKC", text).casefold()
    return re.sub(r"[\W_]+", "", text)


def context_words(user=None) -> list[str]:
    """Every word refused in a new password for `user`, folded: the settings' list, the workspaces' names,
    the role names, and the user's own names (user name, first and last name, e-mail's local part)."""
    words = list(settings.PASSWORD_CONTEXT_WORDS)
    words += [value for value, _label in Role.choices]
    words += Workspace.objects.values_list("name", flat=True)
    found = {folded(word) for word in words if len(folded(word)) >= SHORTEST_WORD}
    if user is not None:
        own = [user.get_username(), user.first_name, user.last_name]
        own.append((getattr(user, "email", "") or "").partition("@")[0])
        found |= {folded(name) for name in own if len(folded(name or "")) >= SHORTEST_OWN_NAME}
    return sorted(found)


class ContextWordsValidator:
    """A new password may not contain a word of the product's context (docs/security.md)."""

    def validate(self, password: str, user=None) -> None:
        text = folded(password)
        used = [word for word in context_words(user) if word in text]
        if used:
            raise ValidationError(
                "This password contains a word of this product, company, a workspace, a role or your "
                "own name (%(words)s); choose one without it.",
                code="password_context_word",
                params={"words": ", ".join(used)},
            )

    def get_help_text(self) -> str:
        return (
            "Your password can't contain the product's or company's name, a workspace's or role's "
            "name, or your own names."
        )


class BreachUnknown(Exception):
    """The breached-password service gave no usable answer."""


def breach_count(password: str, *, base_url: str, timeout: float) -> int:
    """How many times the range API says this password was seen in breaches (0: never)."""
    digest = hashlib.sha1(password.encode("utf-8"), usedforsecurity=False).hexdigest().upper()
    prefix, suffix = digest[:5], digest[5:]
    try:
        answer = httpx.get(
            f"{base_url.rstrip('/')}/range/{prefix}",
            headers={"Add-Padding": "true", "User-Agent": "handoff-console password check"},
            timeout=timeout,
        )
    except httpx.HTTPError as exc:
        raise BreachUnknown(f"unreachable ({exc.__class__.__name__})") from exc
    if answer.status_code != 200:
        raise BreachUnknown(f"answered {answer.status_code}")
    for line in answer.text.splitlines():
        found, _, count = line.strip().partition(":")
        if found.upper() == suffix:
            # A padding line has a count of 0: not a breach.
            return int(count) if count.isdigit() else 0
    return 0


class BreachedPasswordValidator:
    """A new password seen in a breach is refused; one the service cannot vouch for is refused too."""

    def validate(self, password: str, user=None) -> None:
        base_url = settings.PASSWORD_BREACH_API_URL
        if base_url == "off":
            return
        try:
            count = breach_count(
                password, base_url=base_url, timeout=settings.PASSWORD_BREACH_TIMEOUT_SECONDS
            )
        except BreachUnknown as exc:
            log.warning("breached-password check failed: %s at %s", exc, base_url)
            raise ValidationError(
                "The breached-password check could not be made just now (%(reason)s); no password "
                "is set without it. Try again in a minute.",
                code="password_breach_unknown",
                params={"reason": str(exc)},
            ) from None
        if count:
            raise ValidationError(
                "This password has appeared in a data breach (seen %(count)s times); choose another.",
                code="password_breached",
                params={"count": count},
            )

    def get_help_text(self) -> str:
        return "Your password can't be one that has appeared in a known data breach."
