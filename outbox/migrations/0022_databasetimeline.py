import django.db.models.functions.datetime
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("outbox", "0021_archivedhandoff_request"),
    ]

    operations = [
        migrations.CreateModel(
            name="DatabaseTimeline",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("timeline", models.PositiveBigIntegerField()),
                (
                    "seen_at",
                    models.DateTimeField(db_default=django.db.models.functions.datetime.Now()),
                ),
            ],
        ),
    ]
