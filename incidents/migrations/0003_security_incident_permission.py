"""Security incidents (of no workspace) are shown to holders of `incidents.view_security_incident`, no longer
to every staff account. The permission is a model option (state only, no table touched); the data step
creates its row at once, so that support can grant it right after `migrate`, and gives it to no one: not
to staff, not to the support group (docs/security.md says how support grants it)."""

from django.db import migrations

CODENAME = "view_security_incident"
NAME = "Can view security incidents (they belong to no workspace)"


def permission_create(apps, schema_editor):
    alias = schema_editor.connection.alias
    ContentType = apps.get_model("contenttypes", "ContentType")
    Permission = apps.get_model("auth", "Permission")
    incident, _ = ContentType.objects.using(alias).get_or_create(
        app_label="incidents", model="incident"
    )
    Permission.objects.using(alias).get_or_create(
        content_type=incident, codename=CODENAME, defaults={"name": NAME}
    )


def permission_delete(apps, schema_editor):
    Permission = apps.get_model("auth", "Permission")
    Permission.objects.using(schema_editor.connection.alias).filter(
        content_type__app_label="incidents", codename=CODENAME
    ).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("incidents", "0002_schedule_task_names"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="incident",
            options={"permissions": [(CODENAME, NAME)]},
        ),
        migrations.RunPython(permission_create, permission_delete),
    ]
