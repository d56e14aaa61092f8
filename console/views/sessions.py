"""A person's own sessions: the list (when, how, from which address and browser, this one marked), and ending
one or all of the others (ASVS 7.5.2; approvals/services/sessions.py, docs/security.md)."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from approvals.services.sessions import session_end, sessions_end_others, sessions_of
from lib.querystring import id_or_none


@require_GET
@login_required
def my_sessions(request):
    sessions = sessions_of(user=request.user, current_key=request.session.session_key)
    return render(request, "registration/sessions.html", {"sessions": sessions})


@require_POST
@login_required
def end_session(request):
    ended = 0
    session_id = id_or_none(request.POST.get("session", ""))
    if session_id is not None:
        ended = session_end(
            user=request.user, session_id=session_id, current_key=request.session.session_key
        )
    if ended:
        messages.success(request, "That session has ended: its browser must sign in again.")
    else:
        messages.error(request, "No other session of yours by that number; nothing was ended.")
    return HttpResponseRedirect(reverse("my_sessions"))


@require_POST
@login_required
def end_other_sessions(request):
    ended = sessions_end_others(user=request.user, current_key=request.session.session_key)
    messages.success(request, f"{ended} other session(s) ended; this one stays signed in.")
    return HttpResponseRedirect(reverse("my_sessions"))
