"""The sessions of an account (ASVS 7.1.2, 7.4.5, 7.5.2; docs/security.md "Sessions of an account").

Django's session store has no index by user, so each sign-in writes a `SignedInSession` row naming its
session key, and a sign-out removes it. A session is live while Django's row is unexpired and it has been
used within the idle timeout; rows of sessions found over are removed when the list is read. Ending a
session deletes it from Django's store: its cookie no longer signs anyone in.

An account may hold any number of sessions at once (each browser or device its own); its holder sees them
all and ends any or all others, and an administrator with `approvals.end_sessions` ends any or all.
"""

import time
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import import_module

from django.conf import settings
from django.contrib.sessions.models import Session
from django.db import transaction
from django.utils import timezone

from approvals.models import SignedInSession

# The session key a row indexes, kept in the session itself: when Django gives the session a new key (a
# password change, the second factor), the next request sees the difference and moves the row along.
INDEXED_KEY = "_indexed_session_key"
LAST_ACTIVITY = "_last_activity"  # approvals/idle_sessions.py writes it


@dataclass(frozen=True)
class LiveSession:
    id: int
    method: str
    address: str | None
    user_agent: str
    signed_in_at: datetime
    last_used_at: datetime | None
    current: bool


def _store(session_key: str):
    return import_module(settings.SESSION_ENGINE).SessionStore(session_key=session_key)


def signed_in_session_record(*, session, user, method: str, address: str | None, agent: str):
    """Index the session a sign-in has just begun (its key is already the new one)."""
    if session.session_key is None:
        session.save()
    SignedInSession.objects.filter(session_key=session.session_key).delete()
    session[INDEXED_KEY] = session.session_key
    return SignedInSession.objects.create(
        user=user,
        session_key=session.session_key,
        method=method,
        address=address,
        user_agent=agent[:300],
    )


def signed_in_session_forget(*, session_key: str | None) -> None:
    if session_key:
        SignedInSession.objects.filter(session_key=session_key).delete()


def signed_in_session_follow_key(*, session) -> None:
    """The session got a new key since it was indexed: its row follows it."""
    indexed = session.get(INDEXED_KEY)
    if indexed and session.session_key and indexed != session.session_key:
        SignedInSession.objects.filter(session_key=indexed).update(session_key=session.session_key)
        session[INDEXED_KEY] = session.session_key


def _last_used(data: dict) -> datetime | None:
    last = data.get(LAST_ACTIVITY)
    return datetime.fromtimestamp(last, tz=UTC) if isinstance(last, int) else None


def sessions_of(*, user, current_key: str | None = None) -> list[LiveSession]:
    """The account's live sessions, newest first; rows of sessions that are over are removed."""
    rows = list(SignedInSession.objects.filter(user=user).order_by("-signed_in_at", "-id"))
    stored = {
        s.session_key: s
        for s in Session.objects.filter(
            session_key__in=[row.session_key for row in rows], expire_date__gt=timezone.now()
        )
    }
    now = int(time.time())
    live, over = [], []
    for row in rows:
        session = stored.get(row.session_key)
        data = session.get_decoded() if session is not None else {}
        last = data.get(LAST_ACTIVITY)
        idle = isinstance(last, int) and now - last > settings.SESSION_IDLE_SECONDS
        if session is None or idle or str(data.get("_auth_user_id")) != str(user.pk):
            over.append(row.pk)
            continue
        live.append(
            LiveSession(
                id=row.pk,
                method=row.get_method_display(),
                address=row.address,
                user_agent=row.user_agent,
                signed_in_at=row.signed_in_at,
                last_used_at=_last_used(data),
                current=row.session_key == current_key,
            )
        )
    SignedInSession.objects.filter(pk__in=over).delete()
    return live


def _end(rows) -> int:
    keys = [row.session_key for row in rows]
    for key in keys:
        _store(key).delete()
    SignedInSession.objects.filter(session_key__in=keys).delete()
    return len(keys)


@transaction.atomic
def session_end(*, user, session_id: int, current_key: str | None) -> int:
    """The account holder ends one of their other sessions (their own only; this one is signed out)."""
    rows = SignedInSession.objects.filter(user=user, pk=session_id).exclude(
        session_key=current_key or ""
    )
    return _end(list(rows))


@transaction.atomic
def sessions_end_others(*, user, current_key: str | None) -> int:
    rows = SignedInSession.objects.filter(user=user).exclude(session_key=current_key or "")
    return _end(list(rows))


@transaction.atomic
def sessions_end(*, sessions) -> int:
    """An administrator ends the given sessions (admin's action; `approvals.end_sessions`)."""
    return _end(list(sessions))


@transaction.atomic
def sessions_end_of_users(*, users) -> int:
    """An administrator ends every session of the given users."""
    return _end(list(SignedInSession.objects.filter(user__in=users)))
