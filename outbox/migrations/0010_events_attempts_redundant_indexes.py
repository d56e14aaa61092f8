import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

# The indexes Django made for these foreign keys (db_index=True), named as it names them on every backend:
# each is one more index written per attempt or event, and a wider index already leads with its column.
OLD_INDEXES = [
    (
        "outbox_attempt_handoff_id_4fe7a982",
        "outbox_attempt",
        "handoff_id",
    ),  # attempt_unique_number (handoff, number)
    (
        "outbox_handoffevent_handoff_id_4971bda4",
        "outbox_handoffevent",
        "handoff_id",
    ),  # handoff_event_idx (handoff, at)
    (
        "outbox_handoffevent_actor_id_d90b68d3",
        "outbox_handoffevent",
        "actor_id",
    ),  # handoff_event_actor_idx, partial
]


class Migration(migrations.Migration):
    dependencies = [
        ("outbox", "0009_destination_limits_permission"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        # The partial index first, then the full ones go (with db_index=False): never a moment without one.
        migrations.AddIndex(
            model_name="handoffevent",
            index=models.Index(
                condition=models.Q(("actor__isnull", False)),
                fields=["actor"],
                name="handoff_event_actor_idx",
            ),
        ),
        # By name, as in 0008: altering the fields in the database would drop and re-add each foreign key
        # constraint, and re-adding one validates the whole table under a lock.
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(
                    f'DROP INDEX IF EXISTS "{name}"',
                    f'CREATE INDEX "{name}" ON "{table}" ("{column}")',
                )
                for name, table, column in OLD_INDEXES
            ],
            state_operations=[
                migrations.AlterField(
                    model_name="attempt",
                    name="handoff",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="attempt_set",
                        to="outbox.handoff",
                    ),
                ),
                migrations.AlterField(
                    model_name="handoffevent",
                    name="actor",
                    field=models.ForeignKey(
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                migrations.AlterField(
                    model_name="handoffevent",
                    name="handoff",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="events",
                        to="outbox.handoff",
                    ),
                ),
            ],
        ),
    ]
