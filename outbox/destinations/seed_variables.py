"""The environment variables that seed the default destination (RECEIVER_URL, RECEIVER_CONNECT_TIMEOUT,
RECEIVER_READ_TIMEOUT, RECEIVER_SUPPORTS_*: `settings.HANDOFF_DESTINATION_SEED_VARIABLES`) apply only while
no row of its name exists. Once one does, the row wins; a variable that says otherwise would be silently
ignored, so it is refused instead, naming where the value now lives. One that agrees with the row (the
demo's RECEIVER_URL) changes nothing and passes.

Asked by `manage.py check` (a system check, so every management command's start, `manage.py dispatch`
included, and `runserver`), by `manage.py destinations check`, and again by the dispatcher once its database
answers.
"""

from django.conf import settings
from django.core import checks
from django.db import DatabaseError

from lib.databases import DB
from outbox.destinations.registry import default_destination_name
from outbox.models import DestinationConfig

_UNSET = object()


def seed_variables_refused() -> list[str]:
    """Each seed variable set in the environment that disagrees with the default destination's row; empty
    while no such row exists."""
    variables = settings.HANDOFF_DESTINATION_SEED_VARIABLES
    if not variables:
        return []
    row = DestinationConfig.objects.using(DB).filter(name=default_destination_name()).first()
    if row is None:
        return []
    refused = []
    for variable, key in sorted(variables.items()):
        seeded, held = settings.HANDOFF_DESTINATION[key], row.config.get(key, _UNSET)
        if held == seeded:
            continue
        where = f"is {held!r}" if held is not _UNSET else "is not set (its kind's default applies)"
        refused.append(
            f"{variable} ({seeded!r}) no longer applies: destination {row.name!r} is a row now, whose "
            f"{key} {where}; change {key} in the destinations file (manage.py destinations apply FILE) "
            f"and unset {variable}"
        )
    return refused


@checks.register(checks.Tags.compatibility)
def seed_variables_check(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    """`seed_variables_refused` as a system check. A database that cannot answer yet (not migrated, down)
    refuses nothing here: the dispatcher asks again once it answers."""
    try:
        refused = seed_variables_refused()
    except DatabaseError:
        return []
    return [
        checks.Error(text, hint="docs/destinations.md, Settings only seed", id="outbox.E001")
        for text in refused
    ]
