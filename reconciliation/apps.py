from django.apps import AppConfig


class ReconciliationConfig(AppConfig):
    name = "reconciliation"
    verbose_name = "Reconciliation"

    def ready(self) -> None:
        # A sign-in lockout is a security event: counted, and paged above a rate (docs/incidents.md).
        from axes.signals import user_locked_out

        from reconciliation.alerts.security import record_lockout

        user_locked_out.connect(record_lockout, dispatch_uid="reconciliation.record_lockout")
