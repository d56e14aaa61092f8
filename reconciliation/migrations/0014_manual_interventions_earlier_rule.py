"""handoff_manual_interventions_total moved to a person's rule (an action and a person named,
`HandoffEventQuerySet.interventions`): the events it counted before that no person made (a receiver's status
event, a sweep's end of a hold, a deleted user's) would leave the count at this deploy, a drop Prometheus reads
as a reset. Their count is kept as an archived total of its own (`INTERVENTIONS_EARLIER_RULE`), which the
collector adds to the counter. Data only; undone by deleting those totals."""

from django.db import migrations
from django.db.models import Count

EARLIER_RULE = "manual_interventions_earlier_rule"


def keep_what_the_earlier_rule_counted(apps, schema_editor):
    events = apps.get_model("outbox", "HandoffEvent").objects.using(schema_editor.connection.alias)
    totals = apps.get_model("reconciliation", "ArchivedTotal").objects.using(
        schema_editor.connection.alias
    )
    counted = (
        events.filter(action__gt="", actor__isnull=True)
        .order_by()
        .values_list("handoff__workflow", "handoff__workspace_id")
        .annotate(n=Count("id"))
    )
    for workflow, workspace_id, n in counted:
        workspace = "" if workspace_id is None else str(workspace_id)
        total, _ = totals.get_or_create(
            metric=EARLIER_RULE, workflow=workflow or "", workspace=workspace, label=""
        )
        total.n += n
        total.save(update_fields=["n"])


def forget_them(apps, schema_editor):
    totals = apps.get_model("reconciliation", "ArchivedTotal").objects.using(
        schema_editor.connection.alias
    )
    totals.filter(metric=EARLIER_RULE).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("reconciliation", "0013_incidents_move_to_their_app"),
        ("outbox", "0035_open_notifications_index"),
    ]

    operations = [migrations.RunPython(keep_what_the_earlier_rule_counted, forget_them)]
