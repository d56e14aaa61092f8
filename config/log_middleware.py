"""Binds what a request is about to its log lines (`lib/log_context.py`): the workspace, handoff or action
key its URL names. Each request starts from nothing bound, so a thread's previous request leaks nothing."""

from lib import log_context


class RequestLogContext:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        with log_context.cleared():
            return self.get_response(request)

    def process_view(self, request, view_func, view_args, view_kwargs):
        match = request.resolver_match
        log_context.bind(
            workspace=view_kwargs.get("workspace_id"),
            handoff_id=view_kwargs.get("pk") if match and match.namespace == "outbox" else None,
            action_key=view_kwargs.get("action_key"),
        )
