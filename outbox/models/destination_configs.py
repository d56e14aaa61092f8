"""The receiving systems handoffs go to, as data: one row per destination (healthchecks' `Channel`), its kind
(a key of `outbox.destinations.registry.KINDS`) and that kind's configuration.

The configuration is exactly the dict the kind's `from_config` takes, without `name` and `kind`. A secret is
never part of it: the configuration names where the secret comes from (an environment variable), and the
kind reads it there when it calls. The breaker, limits, slots and events of a destination are kept under the
same name (`outbox/models/destinations.py`). Rows are written by `manage.py destinations apply FILE`.
"""

import re

from django.core.validators import RegexValidator
from django.db import models

from outbox.clock import DbClockDateTimeField

# A destination's name: what handoffs, breakers, limits and rule versions' steps refer to it by.
DESTINATION_NAME = re.compile(r"\A[a-z0-9][a-z0-9_-]{0,39}\Z")
DESTINATION_NAME_RULE = (
    "lowercase letters, digits, _ and - (at most 40, starting with a letter or digit)"
)


class DestinationConfig(models.Model):
    """One receiving system: its name, kind and the kind's configuration (no secret), and whether it is served."""

    name = models.CharField(
        max_length=40,
        validators=[
            RegexValidator(DESTINATION_NAME, f"a destination name is {DESTINATION_NAME_RULE}")
        ],
        help_text="What handoffs and rule versions' steps name it by.",
    )
    kind = models.CharField(max_length=40, help_text="How it is reached (a registered kind).")
    config = models.JSONField(
        default=dict,
        blank=True,
        help_text="The kind's configuration; secrets are named (an environment variable), never stored.",
    )
    enabled = models.BooleanField(
        default=True, help_text="Served by the dispatchers; a disabled one is refused."
    )
    created_at = DbClockDateTimeField(auto_now_add=True)
    updated_at = DbClockDateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["name"], name="destination_config_unique_name")
        ]
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.kind}{'' if self.enabled else ', disabled'})"
