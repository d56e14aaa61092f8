from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    name = "approvals"
    verbose_name = "Approvals (source application)"

    def ready(self) -> None:
        # Connects the signals that start a session's idle clock, index it and mark the steps a password
        # sign-in owes; registers the start-up warning about workspaces whose failures nobody would own.
        from approvals import idle_sessions, on_call, signed_in_sessions  # noqa: F401
        from approvals.auth import sign_in_steps  # noqa: F401
