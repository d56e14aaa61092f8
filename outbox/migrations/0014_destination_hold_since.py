from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("outbox", "0013_status_events")]

    operations = [
        migrations.AddField(
            model_name="destinationhealth",
            name="hold_since",
            field=models.DateTimeField(
                blank=True,
                help_text="When the current Retry-After hold began (database clock).",
                null=True,
            ),
        ),
    ]
