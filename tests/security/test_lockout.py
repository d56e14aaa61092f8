"""Lockout that stops attackers, not colleagues, through the real views (docs/security.md).

Failed provider callbacks never lock anyone: not password sign-in, not other people's single sign-on
behind the same address (an office's NAT). Password guesses keep django-axes' lockout of one user at one
address; many user names failing from one address (spraying) pause password sign-in from that address
with 429 and Retry-After, and raise one security event that pages once."""

import pytest
from axes.models import AccessAttempt, AccessFailureLog
from django.conf import settings
from django.db.models import F
from django.test import Client

from incidents.models import Incident, IncidentSeverity
from reconciliation.models import SecurityEvent, SecurityEventKind
from tests.factories import make_user
from tests.incidents.alert_receiver import AlertReceiver
from tests.incidents.engine import alerts_send_due
from tests.incidents.test_incidents import SECRET, triggers_of, webhook_channel
from tests.sso.scripted import bogus_callback, sign_on

pytestmark = pytest.mark.django_db

OFFICE = "198.51.100.7"  # one NAT address for everyone in the office
ELSEWHERE = "203.0.113.99"
LOGIN = "/accounts/login/"


@pytest.fixture
def provider(scripted_provider, settings):
    """The scripted OpenID provider (its own process); whoever signs in there next is dana."""
    scripted_provider.configure(settings)
    settings.OIDC_LOCAL_PASSWORDS = "break_glass"
    settings.OIDC_ROLE_MAPPING = {}
    scripted_provider.will_answer({"sub": "s-dana", "preferred_username": "dana"})
    return scripted_provider


def sign_in(username: str, password: str, ip: str):
    return Client(REMOTE_ADDR=ip).post(LOGIN, {"username": username, "password": password})


def spray(guesses: int, names: int, ip: str = OFFICE) -> list:
    """`guesses` wrong passwords from `ip`, cycling over `names` user names (some real, most not)."""
    return [sign_in(f"user-{n % names}", "Winter2026!", ip) for n in range(guesses)]


def age_failure_log(by) -> None:
    """As if `by` had passed since every failure logged (the window is counted from these times)."""
    AccessFailureLog.objects.update(attempt_time=F("attempt_time") - by)


# 5 is LOGIN_FAILURE_LIMIT's default: the old per-address count locked the next callback there.
@pytest.mark.parametrize("bogus", [4, 5, 40])
def test_bogus_callbacks_leave_a_colleagues_sso_and_password_sign_in_working(provider, bogus):
    make_user("root", is_superuser=True, is_staff=True)
    before = provider.token_requests()
    attacker = Client(REMOTE_ADDR=OFFICE)
    for _ in range(bogus):
        answer = bogus_callback(attacker)
        assert (answer.status_code, answer["Location"]) == (302, "/accounts/login/?sso=failed")
    assert provider.token_requests() - before == bogus, "every callback reached the provider"

    colleague = Client(REMOTE_ADDR=OFFICE)
    assert sign_on(colleague) == "/"
    assert colleague.get("/approvals/").context["user"].username == "dana"

    break_glass = sign_in("root", "pw-root", OFFICE)
    assert (break_glass.status_code, break_glass["Location"]) == (302, "/")


def test_bogus_callbacks_are_logged_apart_and_count_towards_no_lock(provider):
    for _ in range(settings.AXES_FAILURE_LIMIT + 1):
        bogus_callback(Client(REMOTE_ADDR=OFFICE))
    assert not AccessAttempt.objects.exists()
    logged = AccessFailureLog.objects.filter(
        ip_address=OFFICE, path_info="/accounts/oidc/callback/"
    )
    assert logged.count() == settings.AXES_FAILURE_LIMIT + 1
    assert not logged.filter(username__isnull=False).exists()
    assert not SecurityEvent.objects.exists()


def test_spraying_from_one_address_is_paused_with_429_and_retry_after():
    make_user("alice")
    answers = spray(40, 25)
    threshold = settings.SIGN_IN_SPRAY_USER_NAMES
    assert [a.status_code for a in answers] == [200] * (threshold - 1) + [429] * (41 - threshold)
    window = settings.SIGN_IN_SPRAY_WINDOW.total_seconds()
    assert all(0 < int(a["Retry-After"]) <= window for a in answers[threshold - 1 :])
    page = answers[-1].content.decode()
    assert "Too many different user names failed to sign in from your network address" in page
    assert "even with the right password" in page
    assert sign_in("alice", "pw-alice", OFFICE).status_code == 429, "the whole address waits"
    admin = Client(REMOTE_ADDR=OFFICE).post(
        "/admin/login/", {"username": "alice", "password": "pw-alice"}
    )
    assert admin.status_code == 429, "admin's sign-in form too"
    assert AccessFailureLog.objects.values("username").distinct().count() == threshold


def test_a_colleague_elsewhere_signs_in_while_an_address_is_paused():
    make_user("alice")
    assert spray(40, 25)[-1].status_code == 429
    answer = sign_in("alice", "pw-alice", ELSEWHERE)
    assert (answer.status_code, answer["Location"]) == (302, "/")


def test_single_sign_on_from_a_paused_address_is_not_paused(provider):
    assert spray(40, 25)[-1].status_code == 429
    colleague = Client(REMOTE_ADDR=OFFICE)
    assert sign_on(colleague) == "/"


def test_the_pause_ends_when_the_window_has_passed():
    make_user("alice")
    assert spray(40, 25)[-1].status_code == 429
    age_failure_log(settings.SIGN_IN_SPRAY_WINDOW)
    answer = sign_in("alice", "pw-alice", OFFICE)
    assert (answer.status_code, answer["Location"]) == (302, "/")


def test_fewer_names_than_the_threshold_are_not_paused():
    make_user("alice")
    names = settings.SIGN_IN_SPRAY_USER_NAMES - 1
    answers = spray((settings.AXES_FAILURE_LIMIT - 1) * names, names)
    assert {a.status_code for a in answers} == {200}
    assert sign_in("alice", "pw-alice", OFFICE).status_code == 302
    assert not SecurityEvent.objects.filter(kind=SecurityEventKind.PASSWORD_SPRAYING).exists()


def test_spraying_that_goes_on_after_its_pause_is_one_episode_with_one_event():
    spray(40, 25)
    age_failure_log(settings.SIGN_IN_SPRAY_WINDOW)
    assert spray(40, 25)[-1].status_code == 429
    assert SecurityEvent.objects.filter(kind=SecurityEventKind.PASSWORD_SPRAYING).count() == 1


def test_two_spraying_addresses_are_two_episodes():
    spray(40, 25, OFFICE)
    spray(40, 25, ELSEWHERE)
    details = SecurityEvent.objects.filter(kind=SecurityEventKind.PASSWORD_SPRAYING)
    assert sorted(d.split(":")[0] for d in details.values_list("detail", flat=True)) == [
        f"address {OFFICE}",
        f"address {ELSEWHERE}",
    ]


@pytest.mark.django_db(databases=["default", "delivery"], transaction=True)
def test_spraying_raises_one_security_event_that_pages_once(settings, monkeypatch):
    settings.ALERT_EMAILS = []
    settings.ALERT_WEBHOOK_URL = ""
    settings.ALERT_PAGE_WEBHOOK_URL = ""
    settings.CONSOLE_BASE_URL = "https://console.example"
    monkeypatch.setenv("INCIDENT_WEBHOOK_SECRET", SECRET)
    spray(40, 25)
    [event] = SecurityEvent.objects.all()
    assert (event.kind, event.source) == (SecurityEventKind.PASSWORD_SPRAYING, "sign_in")
    assert event.detail.startswith(f"address {OFFICE}: 10 user names failed within 10 minutes")
    with AlertReceiver() as receiver:
        webhook_channel(receiver)
        alerts_send_due()
        alerts_send_due()
        [incident] = Incident.objects.all()
        assert (incident.cause, incident.severity) == (
            "security:password_spraying",
            IncidentSeverity.PAGE,
        )
        [page] = triggers_of(receiver)
        assert page["incident"]["failure_class"] == "security: password_spraying"
