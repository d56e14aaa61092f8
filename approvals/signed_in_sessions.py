"""Keeps the index of each account's sessions (approvals/services/sessions.py) in step with Django's sessions:
a row at each sign-in, gone at sign-out, moved along when Django gives a session a new key."""

from django.contrib.auth.signals import user_logged_in, user_logged_out
from django.dispatch import receiver

from approvals.models import SignedInSession
from approvals.services.sessions import (
    signed_in_session_follow_key,
    signed_in_session_forget,
    signed_in_session_record,
)

SINGLE_SIGN_ON_BACKEND = "approvals.auth.backends.OIDCRoleBackend"


@receiver(user_logged_in, dispatch_uid="signed_in_sessions_record")
def _record(sender, request, user, **kwargs) -> None:
    if request is None or not hasattr(request, "session"):
        return
    method = (
        SignedInSession.Method.SINGLE_SIGN_ON
        if getattr(user, "backend", "") == SINGLE_SIGN_ON_BACKEND
        else SignedInSession.Method.PASSWORD
    )
    signed_in_session_record(
        session=request.session,
        user=user,
        method=method,
        address=request.META.get("REMOTE_ADDR") or None,
        agent=request.META.get("HTTP_USER_AGENT", ""),
    )


@receiver(user_logged_out, dispatch_uid="signed_in_sessions_forget")
def _forget(sender, request, user, **kwargs) -> None:
    if request is not None and hasattr(request, "session"):
        signed_in_session_forget(session_key=request.session.session_key)


class FollowSessionKeys:
    """After the view: a session whose key changed during the request (Django cycles it at a password change
    and at the second factor) has its row moved to the new key. No query unless the key changed."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        session, user = getattr(request, "session", None), getattr(request, "user", None)
        if session is not None and user is not None and user.is_authenticated:
            signed_in_session_follow_key(session=session)
        return response
