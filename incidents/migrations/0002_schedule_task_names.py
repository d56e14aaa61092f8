"""The alert sweep's django-q2 schedule names its task at its new place (`incidents.tasks.alerts_send_due`,
was `reconciliation.tasks.alerts_send_due`): a database scheduled before the move keeps sweeping without
`manage.py schedule_reconciliation` being run again. Replays queued before the move under the old names
are resumed by the sweep (`replays_resume`)."""

from django.db import migrations

RENAMED = {"reconciliation.tasks.alerts_send_due": "incidents.tasks.alerts_send_due"}


def _schedules_rename(apps, schema_editor, renames: dict[str, str]):
    Schedule = apps.get_model("django_q", "Schedule")
    rows = Schedule.objects.using(schema_editor.connection.alias)
    for old, new in renames.items():
        rows.filter(func=old).update(func=new)


def schedules_follow(apps, schema_editor):
    _schedules_rename(apps, schema_editor, RENAMED)


def schedules_return(apps, schema_editor):
    _schedules_rename(apps, schema_editor, {new: old for old, new in RENAMED.items()})


class Migration(migrations.Migration):
    dependencies = [
        ("incidents", "0001_initial"),
        ("django_q", "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more"),
    ]

    operations = [migrations.RunPython(schedules_follow, schedules_return)]
