"""Staff groups: support staff (read-only admin and two safe actions) and destination admins."""

from django.apps import apps
from django.contrib.auth.models import Group, Permission
from django.contrib.contenttypes.models import ContentType
from django.db import transaction

from lib.databases import DB
from outbox.limit_rules import SET_LIMITS_PERMISSION

SUPPORT_GROUP = "support staff"
# Support staff read the records below in Django admin and may run two safe actions on handoffs
# (reconcile, assign); nothing else. Each entry is (app label, model, permission codename).
SUPPORT_VIEWS = {
    "approvals": (
        "workspace",
        "membership",
        "rolechange",
        "request",
        "requestevent",
        "approval",
        "triggerrecord",
        "requestreference",
        "ruleversion",
        "workflowmode",
        "workflowmodechange",
        "workspaceworkflow",
    ),
    "outbox": ("handoff", "attempt", "handoffevent", "destinationconfig"),
    "reconciliation": ("reconciliationrun", "finding", "findingevent"),
    "incidents": ("incident",),
    "delivery": ("receivertask", "seenmessage"),
}
SUPPORT_ACTIONS = {
    (
        "outbox",
        "handoff",
        "reconcile_handoff",
    ): "Can reconcile handoffs (asks the receiver, sends nothing)",
    (
        "outbox",
        "handoff",
        "assign_handoff",
    ): "Can assign handoffs to an operator of their workspace",
}


def _support_permissions() -> list[Permission]:
    """The support group's permissions, each created where it is missing: one read of those that exist, not
    a get_or_create each (every support enrolment syncs the group)."""
    wanted: dict[tuple[int, str], str] = {}
    for app_label, models in SUPPORT_VIEWS.items():
        for model in models:
            model_class = apps.get_model(app_label, model)
            content_type = ContentType.objects.get_for_model(model_class)
            wanted[(content_type.pk, f"view_{model}")] = (
                f"Can view {model_class._meta.verbose_name}"
            )
    for (app_label, model, codename), name in SUPPORT_ACTIONS.items():
        content_type = ContentType.objects.get_for_model(apps.get_model(app_label, model))
        wanted[(content_type.pk, codename)] = name
    found = _permissions_named(wanted)
    if missing := [key for key in wanted if key not in found]:
        Permission.objects.bulk_create(
            [
                Permission(content_type_id=ct, codename=code, name=wanted[(ct, code)])
                for ct, code in missing
            ],
            ignore_conflicts=True,  # created meanwhile by another enrolment: read back below
        )
        found = _permissions_named(wanted)
    return [found[key] for key in wanted]


def _permissions_named(keys) -> dict[tuple[int, str], Permission]:
    """The permissions that exist among (content type id, codename) `keys`."""
    keys = set(keys)
    candidates = Permission.objects.filter(
        content_type_id__in={ct for ct, _ in keys}, codename__in={code for _, code in keys}
    )
    return {
        (p.content_type_id, p.codename): p
        for p in candidates
        if (p.content_type_id, p.codename) in keys
    }


def support_group_sync() -> Group:
    """The support staff group with exactly its permissions (extra ones are removed). Safe to run again."""
    with transaction.atomic(using=DB):
        group, _ = Group.objects.get_or_create(name=SUPPORT_GROUP)
        group.permissions.set(_support_permissions())
    return group


def support_staff_enroll(*, user) -> None:
    """Make `user` support staff: admin access through the support group, never a superuser."""
    group = support_group_sync()
    with transaction.atomic(using=DB):
        user.is_staff = True
        user.is_superuser = False
        user.save(update_fields=["is_staff", "is_superuser"])
        user.groups.set([group])


DESTINATION_ADMINS_GROUP = "Destination admins"


def destination_admins_group_sync() -> Group:
    """The group whose members may set destinations' limits (they still need an operator role): exactly the
    `outbox.set_destination_limits` permission (extra ones are removed). Safe to run again."""
    app_label, codename = SET_LIMITS_PERMISSION.split(".")
    model = apps.get_model(app_label, "destinationhealth")
    with transaction.atomic(using=DB):
        permission, _ = Permission.objects.get_or_create(
            content_type=ContentType.objects.get_for_model(model),
            codename=codename,
            defaults={"name": dict(model._meta.permissions)[codename]},
        )
        group, _ = Group.objects.get_or_create(name=DESTINATION_ADMINS_GROUP)
        group.permissions.set([permission])
    return group


def destination_admin_enroll(*, user) -> None:
    """Put `user` in the destination admins group (other groups and roles unchanged). Safe to run again."""
    user.groups.add(destination_admins_group_sync())
