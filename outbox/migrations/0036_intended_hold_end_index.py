"""The backlog alert x a hold (issue 40's round): a partial index of the ends of the holds a destination is meant
to wait through (an operator's pause or window, a Retry-After wait), by destination, so that the alert sweep
finds a destination's last such end after its oldest due handoff from a few index entries rather than every
hold ever recorded; built CONCURRENTLY on PostgreSQL."""

from django.db import migrations, models
from django.db.models.functions import Coalesce, Least

from outbox.online_schema import AddIndexOnline


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("outbox", "0035_open_notifications_index")]

    operations = [
        AddIndexOnline(
            model_name="destinationhold",
            index=models.Index(
                models.F("destination"),
                Coalesce(Least("ended_at", "ends_at"), "ended_at", "ends_at"),
                condition=models.Q(("kind__in", ("operator_pause", "window", "retry_after"))),
                name="dest_hold_intended_end_idx",
            ),
        ),
    ]
