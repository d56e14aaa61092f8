from django.apps import AppConfig


class OutboxConfig(AppConfig):
    name = "outbox"
    verbose_name = "Outbox (handoffs and delivery attempts)"

    def ready(self) -> None:
        # Registers the system check that refuses a seed variable the default destination's row overrides.
        from outbox.destinations import seed_variables  # noqa: F401
        from outbox.failover import connect_timeline_check

        # Every new connection to the source database notices a failover (outbox/failover.py).
        connect_timeline_check()
