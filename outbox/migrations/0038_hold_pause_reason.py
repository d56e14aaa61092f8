"""A breaker's hold says why it pauses its destination (issue 40's round): `DestinationHold.pause_reason`, so that
a pause for its OAuth2 token endpoint's outage reads `token_endpoint` ("token endpoint unavailable (the API was
not called)") on every screen, alert and `destinations holds`, not `unreachable`. A constant `db_default`:
PostgreSQL adds the column without rewriting the table, and the release before, which does not know the
column, writes its holds with it (empty: the hold's kind says why, as before). The holds already written keep
their meaning. `DestinationHealth.pause_reason` only gains the choice (no change to the table)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("outbox", "0037_event_actor_deleted"),
    ]

    operations = [
        migrations.AddField(
            model_name="destinationhold",
            name="pause_reason",
            field=models.CharField(blank=True, db_default="", default="", max_length=16),
        ),
        migrations.AlterField(
            model_name="destinationhealth",
            name="pause_reason",
            field=models.CharField(
                blank=True,
                choices=[
                    ("unreachable", "Unreachable (connection failures or 5xx)"),
                    ("token_endpoint", "Token endpoint unavailable (the API was not called)"),
                    ("credential", "Credentials refused (401/403)"),
                    ("unservable", "Cannot be served (configuration, secret or timeouts)"),
                ],
                max_length=16,
            ),
        ),
    ]
