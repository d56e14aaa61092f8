from django.apps import AppConfig


class IncidentsConfig(AppConfig):
    name = "incidents"
    label = "incidents"
    verbose_name = "Incidents"

    def ready(self) -> None:
        # A notification's page is sent only while its cause holds: asked at the engine's send step.
        # Whoever leaves hands their incidents on at once: the receivers connect on import.
        import incidents.owners_left  # noqa: F401
        from incidents.channels.delivery import KEY_PREFIX
        from incidents.services.erasure import incidents_erase
        from incidents.services.incidents import notification_send_check
        from outbox.dispatch.withdrawals import send_check_register
        from outbox.services.erasure import erasure_part_register

        send_check_register(prefix=KEY_PREFIX, check=notification_send_check)
        # An erasure reaches the incidents' evidence, which quotes a failure's answer.
        erasure_part_register(incidents_erase)
