"""A deleted user x the interventions count (issue 40's round): `HandoffEvent.actor_deleted` marks an event whose
person's account was deleted (its `actor` set to null), so that it stays a manual intervention on Health and in
/metrics. A constant `db_default`: PostgreSQL adds the column without rewriting or scanning the large events
table (a moment's lock), and the release before, which does not know the column, writes its events with it."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("outbox", "0036_intended_hold_end_index"),
    ]

    operations = [
        migrations.AddField(
            model_name="handoffevent",
            name="actor_deleted",
            field=models.BooleanField(
                db_default=False, default=False, help_text="The person who acted was deleted since."
            ),
        ),
    ]
