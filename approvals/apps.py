from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    name = "approvals"
    verbose_name = "Approvals (source application)"

    def ready(self) -> None:
        # Connects the signal that starts a session's idle clock at sign-in.
        from approvals import idle_sessions  # noqa: F401
