"""How strongly the identity provider authenticated the person (ASVS 6.8.4, docs/sso.md "Authentication
strength"): the ID token's `acr`, `amr` and `auth_time` checked against the settings, before any account is
touched.

- `OIDC_REQUIRED_ACR_VALUES`: the token's `acr` must be one of them (they are also asked for, `acr_values`);
- `OIDC_REQUIRED_AMR`: the token's `amr` must name at least one of them (such as `mfa`, `otp`, `hwk`);
- `OIDC_MAX_AUTH_AGE_SECONDS`: the token's `auth_time` must be that recent (also asked for, `max_age`).

With none set, the console takes the provider's own policy as it is (the fallback docs/sso.md states).
"""

import time

from django.conf import settings

# `auth_time` a little ahead of our clock is the provider's clock, not a forgery: as the ID token's lifetime.
LEEWAY_SECONDS = 30


def _listed(value) -> list[str]:
    """`amr` is a JSON array of strings (OpenID Connect Core §2); anything else names no method."""
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return value
    return []


def _acr_refusal(claims: dict) -> str | None:
    acr_values = settings.OIDC_REQUIRED_ACR_VALUES
    if acr_values and claims.get("acr") not in acr_values:
        return (
            f"your sign-in's level ({claims.get('acr') or 'none given'}) is not one this console "
            f"requires ({', '.join(acr_values)})"
        )
    return None


def _amr_refusal(claims: dict) -> str | None:
    required_amr = settings.OIDC_REQUIRED_AMR
    used = _listed(claims.get("amr"))
    if required_amr and not set(used) & set(required_amr):
        return (
            f"your sign-in used {', '.join(used) or 'no method the provider named'}, and this console "
            f"requires one of {', '.join(required_amr)}: sign in again with your second factor"
        )
    return None


def _auth_time_refusal(claims: dict, now: float) -> str | None:
    max_age = settings.OIDC_MAX_AUTH_AGE_SECONDS
    if not max_age:
        return None
    auth_time = claims.get("auth_time")
    if not isinstance(auth_time, int | float) or isinstance(auth_time, bool):
        return "the provider did not say when you authenticated (auth_time)"
    if auth_time > now + LEEWAY_SECONDS:
        return "the provider's time of authentication is in the future"
    if now - auth_time > max_age:
        return f"you authenticated at the provider more than {max_age // 60} minutes ago: sign in there again"
    return None


def sign_on_strength_refusal(claims: dict, *, now: float | None = None) -> str | None:
    """Why the token's authentication is weaker than configured, in words for the person; None if it is not."""
    now = time.time() if now is None else now
    return _acr_refusal(claims) or _amr_refusal(claims) or _auth_time_refusal(claims, now)


def sign_on_strength_request_params() -> dict:
    """What the authentication request asks of the provider, from the same settings."""
    params = {}
    if settings.OIDC_REQUIRED_ACR_VALUES:
        params["acr_values"] = " ".join(settings.OIDC_REQUIRED_ACR_VALUES)
    if settings.OIDC_MAX_AUTH_AGE_SECONDS:
        params["max_age"] = str(settings.OIDC_MAX_AUTH_AGE_SECONDS)
    return params
