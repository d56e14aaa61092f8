"""Signing in and out: the password form (break-glass only once single sign-on is on), the identity
provider's sign-in, and a sign-out that also ends the provider's session where it offers one.

With single sign-on on and local passwords off, posting the password form is refused with 403 before any
password is checked, whatever the form holds: the form is not a way in.
"""

from urllib.parse import urlencode

from django.conf import settings
from django.contrib import auth
from django.contrib.auth import views as auth_views
from django.http import Http404, HttpResponseForbidden, HttpResponseRedirect
from django.shortcuts import render, resolve_url
from django.urls import reverse
from django.views.decorators.http import require_POST
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from approvals.auth.backends import local_passwords_mode

PASSWORDS_OFF = "Password sign-in is switched off: sign in through the identity provider."


class SignInView(auth_views.LoginView):
    def post(self, request, *args, **kwargs):
        if local_passwords_mode() == "off":
            return HttpResponseForbidden(PASSWORDS_OFF, content_type="text/plain")
        return super().post(request, *args, **kwargs)

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        context["sso_enabled"] = settings.OIDC_ENABLED
        context["sso_provider"] = settings.OIDC_PROVIDER_NAME
        context["passwords_mode"] = local_passwords_mode()
        context["sso_failed"] = self.request.GET.get("sso") == "failed"
        return context


class _SsoOnly:
    def dispatch(self, request, *args, **kwargs):
        if not settings.OIDC_ENABLED:
            raise Http404("single sign-on is not configured")
        return super().dispatch(request, *args, **kwargs)


class SignInRequestView(_SsoOnly, OIDCAuthenticationRequestView):
    """Sends the browser to the provider (state, nonce, PKCE kept in the session)."""


class SignInCallbackView(_SsoOnly, OIDCAuthenticationCallbackView):
    """The provider's answer: the code is exchanged and the ID token checked by OIDCRoleBackend."""


def _provider_logout_url(request) -> str | None:
    id_token = request.session.get("oidc_id_token")
    if not (settings.OIDC_ENABLED and settings.OIDC_OP_END_SESSION_ENDPOINT and id_token):
        return None
    query = urlencode(
        {
            "id_token_hint": id_token,
            "client_id": settings.OIDC_RP_CLIENT_ID,
            "post_logout_redirect_uri": request.build_absolute_uri(reverse("login")),
        }
    )
    return f"{settings.OIDC_OP_END_SESSION_ENDPOINT}?{query}"


@require_POST
def sign_out(request):
    """Ends this session; a session begun at the provider also ends there (its end_session_endpoint).

    The provider's page is reached from a page of ours, not by redirecting the form's POST: the
    Content-Security-Policy's form-action lets a form lead to this origin only."""
    provider_url = _provider_logout_url(request)
    auth.logout(request)
    if provider_url is None:
        return HttpResponseRedirect(resolve_url(settings.LOGOUT_REDIRECT_URL))
    response = render(
        request,
        "registration/provider_sign_out.html",
        {"provider_url": provider_url, "sso_provider": settings.OIDC_PROVIDER_NAME},
    )
    response["Refresh"] = f"0; url={provider_url}"
    return response
