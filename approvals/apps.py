from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    name = "approvals"
    verbose_name = "Approvals (source application)"

    def ready(self) -> None:
        # Connects the signal that starts a session's idle clock at sign-in; registers the start-up
        # warning about workspaces whose failures nobody would own.
        from approvals import idle_sessions, on_call  # noqa: F401
