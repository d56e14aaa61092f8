from django.apps import AppConfig


class ReconciliationConfig(AppConfig):
    name = "reconciliation"
    verbose_name = "Reconciliation"

    def ready(self) -> None:
        # A sign-in lockout is a security event: counted, and paged above a rate (docs/incidents.md).
        from axes.signals import user_locked_out
        from django.conf import settings
        from django.db.models.signals import pre_delete

        from approvals.auth.lockout import password_spraying_paused
        from reconciliation.metric_totals import person_deleted_keep_interventions
        from reconciliation.security_events import record_lockout, record_spraying

        user_locked_out.connect(record_lockout, dispatch_uid="reconciliation.record_lockout")
        # Password spraying from one address: one event an episode, which pages at once (causes.py).
        password_spraying_paused.connect(
            record_spraying, dispatch_uid="reconciliation.record_spraying"
        )
        # A deleted user's events lose their person: they are marked a deleted person's first, so that they
        # stay manual interventions and neither Health's count nor the counter goes down
        # (reconciliation/metric_totals.py).
        pre_delete.connect(
            person_deleted_keep_interventions,
            sender=settings.AUTH_USER_MODEL,
            dispatch_uid="reconciliation.person_deleted_keep_interventions",
        )
