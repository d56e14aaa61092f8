"""Signing in and out: the password form (break-glass only once single sign-on is on), the identity
provider's sign-in, and a sign-out that also ends the provider's session where it offers one.

With single sign-on on and local passwords off, posting the password form is refused with 403 before any
password is checked, whatever the form holds: the form is not a way in.
"""

from urllib.parse import urlencode

from axes.handlers.proxy import AxesProxyHandler
from django.conf import settings
from django.contrib import auth, messages
from django.contrib.auth import get_user_model
from django.contrib.auth import views as auth_views
from django.http import Http404, HttpResponseForbidden, HttpResponseRedirect
from django.shortcuts import render, resolve_url
from django.urls import reverse, reverse_lazy
from django.views.decorators.http import require_POST
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from approvals.auth.backends import local_passwords_mode, password_changeable
from approvals.auth.sign_in_steps import PASSWORD_CHANGE_OWED, password_change_done
from approvals.auth.sign_on_refusals import sign_on_refusal, sign_on_refusal_forget
from approvals.auth.sign_on_strength import sign_on_strength_request_params
from approvals.errors import ApprovalsError
from approvals.models import SignOnIdentityEvent
from approvals.services.identities import identity_link
from approvals.services.initial_passwords import initial_password_clear

PASSWORDS_OFF = "Password sign-in is switched off: sign in through the identity provider."


class SignInView(auth_views.LoginView):
    def post(self, request, *args, **kwargs):
        if local_passwords_mode() == "off":
            return HttpResponseForbidden(PASSWORDS_OFF, content_type="text/plain; charset=utf-8")
        return super().post(request, *args, **kwargs)

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        context["sso_enabled"] = settings.OIDC_ENABLED
        context["sso_provider"] = settings.OIDC_PROVIDER_NAME
        context["passwords_mode"] = local_passwords_mode()
        context["sso_failed"] = self.request.GET.get("sso") == "failed"
        context["sso_refusal"] = sign_on_refusal(self.request) if context["sso_failed"] else None
        context["sso_linked"] = self.request.GET.get("sso") == "linked"
        return context


class _SsoOnly:
    def dispatch(self, request, *args, **kwargs):
        if not settings.OIDC_ENABLED:
            raise Http404("single sign-on is not configured")
        return super().dispatch(request, *args, **kwargs)


class SignInRequestView(_SsoOnly, OIDCAuthenticationRequestView):
    """Sends the browser to the provider (state, nonce, PKCE kept in the session), asking for the
    authentication strength the settings require (`acr_values`, `max_age`)."""

    def get_extra_params(self, request):
        return {**super().get_extra_params(request), **sign_on_strength_request_params()}


class SignInCallbackView(_SsoOnly, OIDCAuthenticationCallbackView):
    """The provider's answer: the code is exchanged and the ID token checked by OIDCRoleBackend."""


def _password_holds(request, username: str, password: str):
    """The account named `username` if `password` is its own; a failure counts as a failed sign-in
    (django-axes' lockout applies, as on the sign-in form)."""
    credentials = {"username": username}
    if not AxesProxyHandler.is_allowed(request, credentials):
        return None
    user = get_user_model().objects.filter(username=username, is_active=True).first()
    if user is not None and user.has_usable_password() and user.check_password(password):
        return user
    auth.user_login_failed.send(sender=__name__, credentials=credentials, request=request)
    return None


def link_account(request):
    """A refused first sign-on named an existing account: its holder links it with its password.

    The provider vouched for the identity minutes ago (the session's refusal); the password proves the
    account. Both together bind them, audited; the person then signs in through the provider again."""
    refusal = sign_on_refusal(request)
    if not settings.OIDC_ENABLED or refusal is None or not refusal["existing"]:
        raise Http404("no refused sign-on to link in this browser")
    error = ""
    if request.method == "POST":
        user = _password_holds(request, refusal["existing"], request.POST.get("password", ""))
        if user is None:
            error = "That is not the password of this account, or it is locked for now."
        else:
            try:
                identity_link(
                    user=user,
                    issuer=refusal["issuer"],
                    subject=refusal["subject"],
                    action=SignOnIdentityEvent.Action.LINKED_BY_PASSWORD,
                    reason="the account's password, right after the provider's sign-on",
                )
            except ApprovalsError as exc:
                error = str(exc)
            else:
                sign_on_refusal_forget(request)
                return HttpResponseRedirect(f"{reverse('login')}?sso=linked")
    context = {"refusal": refusal, "error": error, "sso_provider": settings.OIDC_PROVIDER_NAME}
    return render(request, "registration/link_account.html", context, status=400 if error else 200)


class PasswordChangeView(auth_views.PasswordChangeView):
    """A person's own password, the current one required, where passwords sign them in (404 elsewhere).

    A wrong current password counts as a failed sign-in (django-axes' lockout applies, as on the sign-in
    form). Django keeps this session and ends the person's others: their session hash no longer matches."""

    template_name = "registration/password_change.html"
    success_url = reverse_lazy("home")

    def dispatch(self, request, *args, **kwargs):
        if request.user.is_authenticated and not password_changeable(request.user):
            raise Http404("passwords do not sign this account in")
        return super().dispatch(request, *args, **kwargs)

    def post(self, request, *args, **kwargs):
        if not AxesProxyHandler.is_allowed(request, self._credentials()):
            context = self.get_context_data(form=self.get_form(), locked=True)
            return self.render_to_response(context, status=429)
        return super().post(request, *args, **kwargs)

    def form_invalid(self, form):
        if form.has_error("old_password", "password_incorrect"):
            auth.user_login_failed.send(
                sender=__name__, credentials=self._credentials(), request=self.request
            )
        return super().form_invalid(form)

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        context["initial_password"] = bool(self.request.session.get(PASSWORD_CHANGE_OWED))
        return context

    def form_valid(self, form):
        response = super().form_valid(form)
        initial_password_clear(user=form.user)
        password_change_done(self.request)
        messages.success(self.request, "Your password is changed; your other sessions have ended.")
        return response

    def _credentials(self) -> dict:
        return {"username": self.request.user.get_username()}


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
