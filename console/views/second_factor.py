"""The second factor after a password (ASVS 6.3.3; approvals/auth/second_factor.py): the code of the
person's authenticator, or enrolling one, shown once as its key and otpauth URI."""

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import BACKEND_SESSION_KEY
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponseRedirect
from django.shortcuts import render, resolve_url
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from approvals.auth.second_factor import (
    totp_device,
    totp_enrolment_confirm,
    totp_enrolment_start,
    totp_secret,
    totp_verify,
    totp_wait_seconds,
)
from approvals.auth.sign_in_steps import PASSWORD_BACKEND, SECOND_FACTOR_OWED, second_factor_done


def _done(request):
    second_factor_done(request)
    return HttpResponseRedirect(resolve_url(settings.LOGIN_REDIRECT_URL))


@require_http_methods(["GET", "POST"])
@login_required
def second_factor(request):
    """The code after the password; a person without an authenticator enrols one first."""
    if not request.session.get(SECOND_FACTOR_OWED):
        return HttpResponseRedirect(resolve_url(settings.LOGIN_REDIRECT_URL))
    if totp_device(request.user) is None:
        return HttpResponseRedirect(reverse("second_factor_enrol"))
    error, status = "", 200
    if request.method == "POST":
        if totp_verify(user=request.user, code=request.POST.get("code", "")):
            return _done(request)
        wait = totp_wait_seconds(request.user)
        error = "That code is not right, or was used already."
        if wait:
            error += f" Wrong codes hold your authenticator back: try again in {wait} s."
        status = 400
    return render(request, "registration/second_factor.html", {"error": error}, status=status)


@require_http_methods(["GET", "POST"])
@login_required
def second_factor_enrol(request):
    """Enrol an authenticator: a new key, shown once, confirmed by one of its codes.

    Open to a password session that owes a second factor without one, and to a password user who has none
    yet; a person with an authenticator gets a new one only through an administrator's reset."""
    if request.session.get(BACKEND_SESSION_KEY) != PASSWORD_BACKEND:
        raise Http404("single sign-on users' factors are the provider's")
    if totp_device(request.user) is not None:
        raise Http404("this account has an authenticator; an administrator resets a lost one")
    context, status = {}, 200
    action = request.POST.get("action") if request.method == "POST" else None
    if action == "start":
        device = totp_enrolment_start(user=request.user)
        context = {"secret": totp_secret(device), "uri": device.config_url}
    elif action == "confirm":
        if totp_enrolment_confirm(user=request.user, code=request.POST.get("code", "")):
            messages.success(
                request, "Your authenticator is enrolled: you will be asked for a code."
            )
            if request.session.get(SECOND_FACTOR_OWED):
                return _done(request)
            return HttpResponseRedirect(resolve_url(settings.LOGIN_REDIRECT_URL))
        context = {"error": "That code is not right: set up the authenticator again."}
        status = 400
    return render(request, "registration/second_factor_enrol.html", context, status=status)
