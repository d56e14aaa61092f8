"""The console user name a first sign-on may take: normalised, plain, and unlike any name already here.

A provider's `preferred_username` is the person's own choice at many providers. Two names that read the
same on every screen (`dana` and `dana `, `olga` and `оlga` with a Cyrillic о) would let one person pass for
another, so a name is NFKC-normalised, must be one run of letters, digits and `.@+-_` (Django's user name
rule, no space, no control or format character), and is refused when its Unicode TR 39 skeleton, case
folded, equals an existing user's or when it mixes scripts in a confusable way.
"""

import unicodedata

from django.contrib.auth import get_user_model
from django.contrib.auth.validators import UnicodeUsernameValidator
from django.core.exceptions import ValidationError

USERNAME_MAX = 150


class UsernameRefused(Exception):
    """The claimed name cannot be a console user name; the message says why, in words."""


# confusable_homoglyphs is imported where a name is checked: it loads Unicode's tables at import (about 0.015 s
# of CPU), and every web process imports this module with the sign-in views, most never signing anyone on.
def _skeleton(name: str) -> str:
    """The name as a reader sees it: each character replaced by the Latin one it is confusable with."""
    from confusable_homoglyphs import confusables

    out = []
    for char in name.casefold():
        found = confusables.is_confusable(char, greedy=True, preferred_aliases=["latin", "common"])
        out.append(found[0]["homoglyphs"][0]["c"] if found and char.isalpha() else char)
    return "".join(out).casefold()


def username_normalised(raw) -> str:
    """`raw` as a user name (NFKC), or UsernameRefused saying what is wrong with it."""
    if not isinstance(raw, str) or not raw:
        raise UsernameRefused("the provider sent no user name")
    name = unicodedata.normalize("NFKC", raw)
    if len(name) > USERNAME_MAX:
        raise UsernameRefused(f"the user name is longer than {USERNAME_MAX} characters")
    if any(unicodedata.category(c)[0] in "CZ" for c in name):
        raise UsernameRefused("the user name holds a space, a control or an invisible character")
    try:
        UnicodeUsernameValidator()(name)
    except ValidationError as exc:
        raise UsernameRefused(
            "the user name holds characters other than letters, digits and .@+-_"
        ) from exc
    from confusable_homoglyphs import confusables

    if confusables.is_dangerous(name, preferred_aliases=["latin", "common"]):
        raise UsernameRefused("the user name mixes scripts whose letters look alike")
    return name


def username_taken_by(name: str) -> str | None:
    """The existing user name that `name` reads as (the same, in another case, or confusable), if any."""
    users = get_user_model().objects
    exact = users.filter(username__iexact=name).values_list("username", flat=True).first()
    if exact is not None:
        return exact
    wanted = _skeleton(name)
    # Only the names a skeleton could match: those of the same length (TR 39 maps one to one here).
    for existing in users.values_list("username", flat=True).iterator():
        if len(existing) == len(name) and _skeleton(existing) == wanted:
            return existing
    return None
