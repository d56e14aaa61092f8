"""Where a destination's secrets may come from: environment variables named `HANDOFF_DEST_*` and files in
the secrets directory (settings.HANDOFF_SECRETS_DIR), nowhere else.

A destinations file names where each secret is read, and whoever writes that file need not hold the
product's own secrets: without this rule `"token_env": "DJANGO_SECRET_KEY"` sent the session-signing key to
whatever URL the file gave, and `"token_file": "/etc/shadow"` read any file the process can. The rule is
checked when a destination is built (`apply`, `check`, the dispatchers) and again at each read.
"""

import os
import re
from pathlib import Path

from django.conf import settings

ENV_PREFIX = "HANDOFF_DEST_"
_ENV_NAME = re.compile(r"HANDOFF_DEST_[A-Z0-9_]+")


class SecretPlaceRefused(ValueError):
    """A variable or file a destination may not read its secret from; the message says why."""


def env_refusal(name: str) -> str:
    """Why a destination may not read a secret from this variable ("" when it may)."""
    if _ENV_NAME.fullmatch(name):
        return ""
    return (
        f"{name!r} is not a destination's variable: its name must start with {ENV_PREFIX} "
        "(other variables hold the product's own secrets)"
    )


def secrets_dir() -> Path:
    return Path(settings.HANDOFF_SECRETS_DIR).resolve()


def file_refusal(name: str) -> str:
    """Why a destination may not read a secret from this file ("" when it may). A relative name is taken
    in the secrets directory; links are followed before the check, so one pointing out is refused."""
    if "\x00" in name:
        return "a file name with a NUL character"
    directory = secrets_dir()
    if not (directory / name).resolve().is_relative_to(directory):
        return f"{name!r} is outside the secrets directory {directory} (HANDOFF_SECRETS_DIR)"
    return ""


def read_env(name: str) -> str:
    """The variable's value ("" when unset); SecretPlaceRefused when a destination may not name it."""
    if refusal := env_refusal(name):
        raise SecretPlaceRefused(refusal)
    return os.environ.get(name, "")


def secret_file(name: str) -> Path:
    """The file, resolved; SecretPlaceRefused when a destination may not name it."""
    if refusal := file_refusal(name):
        raise SecretPlaceRefused(refusal)
    return (secrets_dir() / name).resolve()
