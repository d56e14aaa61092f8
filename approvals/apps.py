from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    name = "approvals"
    verbose_name = "Approvals (source application)"

    def ready(self) -> None:
        # Connects the signals that start a session's idle clock and index it at sign-in; registers the
        # start-up warning about workspaces whose failures nobody would own.
        from approvals import idle_sessions, on_call, signed_in_sessions  # noqa: F401
