"""Store the built-in onboarding rules as version 1, so that the next rules published become version 2."""

from django.db import migrations

# A copy, not an import: a migration must keep meaning what it meant when it was written.
ONBOARDING_V1_SCHEMA = {
    "type": "object",
    "required": ["client_name", "contact_email", "plan"],
    "properties": {
        "client_name": {"type": "string", "minLength": 1, "maxLength": 200},
        "contact_email": {"type": "string", "minLength": 3, "maxLength": 254},
        "plan": {"type": "string", "enum": ["starter", "standard", "enterprise"]},
        "notes": {"type": "string", "maxLength": 2000},
    },
    "additionalProperties": True,
}


def store_v1(apps, schema_editor):
    RuleVersion = apps.get_model("approvals", "RuleVersion")
    RuleVersion.objects.using(schema_editor.connection.alias).get_or_create(
        workflow="onboarding",
        number=1,
        defaults={
            "version": "onboarding-v1",
            "schema": ONBOARDING_V1_SCHEMA,
            "notes": "built-in rules",
        },
    )


class Migration(migrations.Migration):
    dependencies = [("approvals", "0002_intake_triggers_rules_modes")]

    operations = [migrations.RunPython(store_v1, migrations.RunPython.noop)]
