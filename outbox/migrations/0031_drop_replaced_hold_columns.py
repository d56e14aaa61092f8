"""Release two of two (docs/operations.md, "Rolling deploys"): the seven columns of `outbox_destinationhealth`
that every hold's row replaced (`hold_*`, `window_*`) are dropped. Release one (0027) took them out of the
model and left them in the table for the dispatchers of the release before; no release that still runs
reads or writes them. Reversible: going back re-creates them as they were (nullable, or with a database
default), empty."""

from django.db import migrations, models


def _fields() -> dict[str, models.Field]:
    """The columns as 0006, 0012 and 0014 made them (and 0027 gave `hold_reason` a database default)."""
    return {
        "hold_until": models.DateTimeField(blank=True, null=True),
        "hold_reason": models.CharField(blank=True, db_default="", default="", max_length=200),
        "hold_since": models.DateTimeField(blank=True, null=True),
        "window_starts_at": models.DateTimeField(blank=True, null=True),
        "window_ends_at": models.DateTimeField(blank=True, null=True),
        "window_reason": models.CharField(blank=True, db_default="", default="", max_length=200),
        "window_set_by": models.CharField(blank=True, db_default="", default="", max_length=150),
    }


class Migration(migrations.Migration):
    dependencies = [("outbox", "0030_handoff_erasure_index")]

    operations = [
        # Back into Django's state only (the table has them): so that the removal below drops them.
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AddField(model_name="destinationhealth", name=name, field=field)
                for name, field in _fields().items()
            ],
            database_operations=[],
        ),
        *(migrations.RemoveField(model_name="destinationhealth", name=name) for name in _fields()),
    ]
