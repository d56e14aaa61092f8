"""An incident's owner who leaves hands it on in the same transaction: deactivated, a role taken away or
changed (the admin, the console, the CLI or a sign-in's role sync all save or delete the rows these watch),
or their account deleted. The sweep's `incidents_owners_refresh` still catches a deactivation or a role
changed without a signal (a bulk update)."""

from django.contrib.auth import get_user_model
from django.db.models.signals import post_delete, post_save, pre_delete
from django.dispatch import receiver

from approvals.models import Membership
from incidents.services.notifications import (
    incidents_owned_live,
    incidents_owner_deleted,
    incidents_owners_refresh,
)

User = get_user_model()


@receiver(post_save, sender=User, dispatch_uid="incidents.owner_deactivated")
def owner_deactivated(sender, instance, created: bool, raw: bool = False, **kwargs) -> None:
    if not (created or raw or instance.is_active):
        incidents_owners_refresh(owner_id=instance.pk)


@receiver(post_save, sender=Membership, dispatch_uid="incidents.owner_role_changed")
@receiver(post_delete, sender=Membership, dispatch_uid="incidents.owner_role_removed")
def owner_role_changed(
    sender, instance, raw: bool = False, created: bool = False, **kwargs
) -> None:
    if not (created or raw):
        incidents_owners_refresh(owner_id=instance.user_id)


@receiver(pre_delete, sender=User, dispatch_uid="incidents.owner_deleting")
def owner_deleting(sender, instance, **kwargs) -> None:
    # The deletion sets the owner to null (SET_NULL) before post_delete: which incidents were theirs is
    # read here, and they are handed on once the person and their roles are gone.
    instance.incidents_owned = incidents_owned_live(instance.pk)


@receiver(post_delete, sender=User, dispatch_uid="incidents.owner_deleted")
def owner_deleted(sender, instance, **kwargs) -> None:
    if owned := getattr(instance, "incidents_owned", None):
        incidents_owner_deleted(incident_ids=owned, username=instance.get_username())
