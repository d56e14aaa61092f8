from django.apps import AppConfig


class ReconciliationConfig(AppConfig):
    name = "reconciliation"
    verbose_name = "Reconciliation"

    def ready(self) -> None:
        # A sign-in lockout is a security event: counted, and paged above a rate (docs/incidents.md).
        from axes.signals import user_locked_out

        from approvals.auth.lockout import password_spraying_paused
        from reconciliation.security_events import record_lockout, record_spraying

        user_locked_out.connect(record_lockout, dispatch_uid="reconciliation.record_lockout")
        # Password spraying from one address: one event an episode, which pages at once (causes.py).
        password_spraying_paused.connect(
            record_spraying, dispatch_uid="reconciliation.record_spraying"
        )
