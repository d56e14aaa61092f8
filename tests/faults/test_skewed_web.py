"""Two web processes (gunicorn) on hosts whose clocks are wrong, one 30 s ahead and one 30 s behind
(`faketime`, real processes): an approver approves a request on each through HTTP (the real form, its CSRF
token and session), a dispatcher delivers both handoffs, and then:

- every time stored for them is the database's: request events, the approval, handoff events and attempts lie
  between two readings of the database clock taken around the run, in time order, and a handoff's
  `updated_at` is the time of its last event (a host's clock would put them 30 s off);
- each host's pages measure ages and waits from the database clock: a retry due 10 s ago is due (not "next
  attempt … in 0 minutes" on the host behind), and a handoff made 40 s ago is "0 minutes" old (not "1 minute"
  on the host ahead).

One clock in the assertions: the database's (`db_time`)."""

import math
import re
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

import httpx
import pytest
from django.conf import settings
from django.test import Client

from approvals.models import Approval, Request, RequestEvent
from outbox.clock import DbNow, db_time
from outbox.models import Attempt, FailureClass, Handoff, HandoffEvent, HandoffState
from tests.factories import HandoffFactory, make_request, onboarding_world
from tests.faults.test_dispatch_faults import wait_until
from tests.faults.test_skewed_hosts import SKEW_SECONDS, skewed
from tests.processes import LOCAL_HTTP

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.faults,
    pytest.mark.django_db(databases=["default", "delivery"], transaction=True),
]
S = HandoffState
CSRF_FIELD = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')
CREATED_AGO = re.compile(r"<dt>Created</dt><dd>[^(]*\((\d+)\xa0minutes? ago\)")


def start_web(processes, name: str, seconds: int) -> str:
    """The console under gunicorn on a host `seconds` off; its base URL once it answers."""
    held = processes.port()
    proc = processes._spawn(
        [
            str(Path(sys.executable).with_name("gunicorn")),
            "config.wsgi",
            "--bind",
            "fd://{fd}",
            "--workers",
            "1",
            "--threads",
            "4",
            "--timeout",
            "120",
        ],
        {**processes.base_env, **skewed(seconds)},
        f"web-{name}.log",
        listen=held,
    )
    base = f"http://127.0.0.1:{held.port}"

    def answers() -> bool:
        try:
            return LOCAL_HTTP.get(f"{base}/healthz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    wait_until(answers, timeout=120, what=f"web {name} answering", procs=[proc])
    return base


def signed_in(base: str, user) -> httpx.Client:
    """An HTTP client of `base` with a session of `user` (stored in the database, as a sign-in stores it)."""
    client = Client()
    client.force_login(user)
    session = client.cookies[settings.SESSION_COOKIE_NAME].value
    return httpx.Client(base_url=base, cookies={settings.SESSION_COOKIE_NAME: session}, timeout=30)


def approve_through_the_form(http: httpx.Client, request: Request) -> None:
    page_url = f"/approvals/{request.workspace_id}/{request.number}/{request.revision}/"
    page = http.get(page_url)
    assert page.status_code == 200, page.text[-2000:]
    token = CSRF_FIELD.search(page.text).group(1)
    answer = http.post(
        f"{page_url}decide",
        data={
            "decision": "approve",
            "payload_hash": request.payload_hash,
            "csrfmiddlewaretoken": token,
        },
        headers={"Referer": f"{http.base_url}{page_url}"},
    )
    assert answer.status_code == 302, answer.text[-2000:]


def test_web_hosts_30s_apart_store_on_the_database_clock_and_show_sane_ages(processes):
    world = onboarding_world()
    second = make_request(world["w7"], 43, world["bob"])
    ahead = start_web(processes, "ahead", SKEW_SECONDS)
    behind = start_web(processes, "behind", -SKEW_SECONDS)
    processes.start_receiver()
    started = db_time()

    approve_through_the_form(signed_in(ahead, world["alice"]), world["request"])
    approve_through_the_form(signed_in(behind, world["alice"]), second)
    dispatcher = processes.start_dispatcher("d1")
    wait_until(
        lambda: Handoff.objects.filter(state=S.DELIVERED).count() == 2,
        timeout=300,
        what="both handoffs delivered",
        procs=[dispatcher],
    )
    finished = db_time()
    dispatcher.terminate()  # the handoffs the pages are asked about next are left as they are made
    assert dispatcher.wait(timeout=60) == 0

    handoffs = list(Handoff.objects.order_by("id"))
    assert [h.action_key for h in handoffs] == ["onboarding:7:42:1", "onboarding:7:43:1"]
    assert_on_the_database_clock_in_order(handoffs, started, finished)
    assert_due_retry_is_due(signed_in(behind, world["olga"]))
    assert_age_counts_from_the_database_clock(signed_in(ahead, world["olga"]))


def assert_on_the_database_clock_in_order(handoffs, started: datetime, finished: datetime) -> None:
    def within(label: str, *times) -> None:
        for t in times:
            assert started <= t <= finished, f"{label} {t} outside the run [{started}, {finished}]"

    for request in Request.objects.filter(number__in=[42, 43]):
        within(f"request {request.number} updated_at", request.updated_at)
        events = [e.at for e in RequestEvent.objects.filter(request=request).order_by("id")]
        assert events == sorted(events), f"request {request.number}: events out of time order"
    within("approval", *Approval.objects.values_list("decided_at", flat=True))
    for handoff in handoffs:
        assert_handoff_in_order(handoff, within)


def assert_handoff_in_order(handoff: Handoff, within) -> None:
    times = list(
        HandoffEvent.objects.filter(handoff=handoff).order_by("id").values_list("at", flat=True)
    )
    assert times == sorted(times), f"{handoff.action_key}: events out of time order {times}"
    within(f"{handoff.action_key} event", *times)
    within(handoff.action_key, handoff.created_at, handoff.updated_at, handoff.delivered_at)
    assert handoff.created_at <= times[0]
    # The row and its last event may be written by two statements, each on its own statement time (DbNow): a
    # loaded machine can put seconds between them. A third of the skew still tells the two clocks apart.
    assert abs(handoff.updated_at - times[-1]) <= timedelta(seconds=SKEW_SECONDS / 3)
    attempts = Attempt.objects.filter(handoff=handoff).values_list("started_at", "finished_at")
    assert attempts, f"{handoff.action_key}: no attempt recorded"
    for started_at, finished_at in attempts:
        within(f"{handoff.action_key} attempt", started_at, finished_at)
        assert started_at <= finished_at


def in_backoff(seconds: float) -> Handoff:
    """A pending handoff after a transient failure, its next attempt `seconds` from now (database clock)."""
    handoff = HandoffFactory(
        attempts=1, failure_class=FailureClass.TRANSIENT, next_attempt_at=DbNow(seconds)
    )
    return Handoff.objects.get(pk=handoff.pk)


def assert_due_retry_is_due(http: httpx.Client) -> None:
    # Due 10 s ago on the database clock; on the host 30 s behind that is 20 s ahead of its own clock.
    due = in_backoff(-10)
    page = http.get(f"/handoffs/{due.pk}/")
    assert page.status_code == 200
    assert "· next attempt" not in page.text, "a retry that is due is shown as still waiting"
    listed = http.get("/handoffs/")
    row = listed.text.split(f'id="handoff-{due.pk}"', 1)[1].split("</tr>", 1)[0]
    assert "retry due now" in row, row


def assert_age_counts_from_the_database_clock(http: httpx.Client) -> None:
    # Made 40 s ago on the database clock; on the host 30 s ahead, 70 s ago by its own clock.
    made = HandoffFactory()
    Handoff.objects.filter(pk=made.pk).update(created_at=DbNow(-40))
    created = Handoff.objects.get(pk=made.pk).created_at
    before = db_time()
    page = http.get(f"/handoffs/{made.pk}/")
    after = db_time()
    shown = int(CREATED_AGO.search(page.text).group(1))
    # The minutes the database clock gives at some moment of the request.
    possible = range(
        math.floor((before - created).total_seconds() / 60),
        math.floor((after - created).total_seconds() / 60) + 1,
    )
    assert shown in possible, f"shown {shown} minutes ago, the database clock says {list(possible)}"


def test_faketime_moves_the_clock_of_a_child_process():
    """The premise: libfaketime sets a child's clock 30 s off (else the test above proves nothing)."""
    script = "import time; print(time.time())"
    shown = [
        float(
            subprocess.run(
                [sys.executable, "-c", script],
                env={**skewed(seconds)},
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        )
        for seconds in (SKEW_SECONDS, -SKEW_SECONDS)
    ]
    assert 55 < shown[0] - shown[1] < 65
