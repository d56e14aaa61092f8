"""A replay previewed item by item, at scale, against the receiver as a real process (gunicorn) on
PostgreSQL: an incident of 1,000 failed handoffs, 400 of whose keys the receiver already holds. olga
previews the replay from the incident's page (a background job asks the receiver about every key): 400
already there, 600 missing; a destination that cannot be asked says so for its own incident. She runs it
(another background job): 400 are settled by lookup without a call, 600 are sent, and the receiver's access
log counts exactly 600 creations; the incident then resolves by itself. The per-item results export as CSV.
"""

import csv
import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from django.db import connections
from django.db.models.functions import Now
from django.test import Client

from delivery.models import ReceiverTask
from incidents.models import (
    Incident,
    IncidentState,
    Replay,
    ReplayOutcome,
    ReplayState,
    ReplayVerdict,
)
from incidents.services.incidents import incidents_sync
from incidents.services.replay_preview import replay_preview_run
from incidents.services.replay_run import replay_run
from outbox.models import Attempt, DestinationConfig, Handoff, HandoffEvent, HandoffState
from outbox.payloads import payload_hash
from tests.factories import ONBOARDING_PAYLOAD, onboarding_world
from tests.processes import (
    LOCAL_HTTP,
    ROOT,
    KernelPort,
    database_url,
    manage_argv,
    popen_listening,
)

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.django_db(databases=["default", "delivery"], transaction=True),
]
MEMBERS, THERE = 1000, 400
CREATE_PATH = "/delivery/api/tasks"


class ReceiverProcess:
    """The receiver under gunicorn, its access log naming each request's method, path and status, so that
    the test counts the calls the receiver itself saw."""

    def __init__(self, tmp_path: Path):
        self.held = KernelPort()
        self.port = self.held.port
        self.url = f"http://127.0.0.1:{self.port}/delivery/api"
        self.access_log = tmp_path / "access.log"
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "config.test_settings",
            "DATABASE_URL": database_url("default"),
            "DELIVERY_DATABASE_URL": database_url("delivery"),
        }
        self.proc = popen_listening(
            lambda fd: [
                str(Path(sys.executable).with_name("gunicorn")),
                "config.wsgi",
                "--bind",
                f"fd://{fd}",
                "--worker-class",
                "gthread",
                "--threads",
                "16",
                "--access-logfile",
                str(self.access_log),
                "--access-logformat",
                "%(m)s %(U)s %(s)s",
            ],
            self.held,
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                if (
                    LOCAL_HTTP.get(
                        self.url.replace("/delivery/api", "/healthz"), timeout=5
                    ).status_code
                    == 200
                ):
                    return
            except httpx.HTTPError:
                time.sleep(0.1)
        raise RuntimeError("the receiver did not start")

    def requests(self) -> list[tuple[str, str, str]]:
        return [tuple(line.split()) for line in self.access_log.read_text().splitlines() if line]

    def creates(self) -> int:
        return sum(1 for m, path, _ in self.requests() if m == "POST" and path == CREATE_PATH)

    def keys_asked(self) -> int:
        """Lookups: one per GET of a key; a batch lookup's keys are not in the log, so its requests count."""
        return sum(
            1
            for m, path, _ in self.requests()
            if (m == "GET" and path.startswith(f"{CREATE_PATH}/"))
            or path == f"{CREATE_PATH}/lookup"
        )

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=15)
        self.held.close()


@pytest.fixture
def receiver(tmp_path):
    process = ReceiverProcess(tmp_path)
    yield process
    process.stop()
    for alias in ("default", "delivery"):
        connections[alias].close()


def _failed(numbers: range, *, destination: str) -> list[Handoff]:
    """Handoffs whose retries ran out (the receiver's gateway timed out: some of them had landed), as
    rows in that state (`handoff_record`'s fields, inserted at once: a thousand one by one take a minute)."""
    Handoff.objects.bulk_create(
        Handoff(
            action_key=f"onboarding:7:{n}:1",
            instance_key=f"onboarding:7:{n}:1",
            workflow="onboarding",
            workspace_id=7,
            source_ref=f"request {n} revision 1",
            source_id=n,
            rule_version="onboarding-v1",
            destination=destination,
            payload={**ONBOARDING_PAYLOAD, "client_name": f"Client {n}"},
            payload_hash=payload_hash({**ONBOARDING_PAYLOAD, "client_name": f"Client {n}"}),
            state=HandoffState.NEEDS_ATTENTION,
            failure_class="transient",
            reason_code="retries_exhausted",
            attempts_in_run=8,
        )
        for n in numbers
    )
    rows = Handoff.objects.filter(destination=destination, source_id__in=list(numbers))
    rows.update(attention_since=Now(), run_started_at=Now())
    return list(rows.order_by("source_id"))


def _dispatch_due(receiver: ReceiverProcess) -> None:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.test_settings",
        "DATABASE_URL": database_url("default"),
        "DELIVERY_DATABASE_URL": database_url("delivery"),
        "HANDOFF_DESTINATION": "http",
        "RECEIVER_URL": receiver.url,
        "HANDOFF_WAKE_ON_COMMIT": "0",
        # The receiver row's generous read timeout (30 s) must fit in a lease, or the dispatcher holds
        # that destination and sends nothing (outbox/destinations/lease_rule.py).
        "HANDOFF_LEASE_SECONDS": "60",
    }
    done = subprocess.run(
        manage_argv("dispatch", "--once", "--worker", "replay-test"),
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def _counts(page: str) -> dict[str, int]:
    counts = {}
    for verdict in ReplayVerdict:
        row = page.split(f'data-verdict="{verdict.value}"><td>{verdict.label}</td>', 1)[1]
        counts[verdict.label] = int(row.split('class="count">', 1)[1].split("<", 1)[0])
    return counts


def _world(receiver: ReceiverProcess) -> dict:
    """1,000 failed handoffs at the receiver, 400 of whose keys it holds, and 5 at a destination that
    cannot be asked: two incidents."""
    # The receiver answers for up to 100 keys a request (POST /tasks/lookup): the preview asks in batches.
    DestinationConfig.objects.create(
        name="receiver",
        kind="http",
        # A generous read timeout: this machine runs many test suites at once.
        config={"url": receiver.url, "lookup_batch_size": 100, "read_timeout": 30},
    )
    DestinationConfig.objects.create(
        name="crm-no-lookup", kind="http", config={"url": receiver.url, "supports_lookup": False}
    )
    handoffs = _failed(range(1, MEMBERS + 1), destination="receiver")
    ReceiverTask.objects.using("delivery").bulk_create(
        ReceiverTask(action_key=h.action_key, payload=h.payload, payload_hash=h.payload_hash)
        for h in handoffs[:THERE]
    )
    blind = _failed(range(5001, 5006), destination="crm-no-lookup")
    incidents_sync()
    return {
        "handoffs": handoffs,
        "blind": blind,
        "incident": Incident.objects.get(destination="receiver"),
        "blind_incident": Incident.objects.get(destination="crm-no-lookup"),
    }


def _previewed(olga: Client, incident: Incident) -> tuple[Replay, dict[str, int]]:
    """The replay olga starts on the incident's page, once its preview ran (as the worker runs it), and
    the counts the page then shows."""
    started = olga.post(f"/incidents/{incident.pk}/replay")
    assert started.status_code == 302
    replay = Replay.objects.get(incident=incident)
    assert replay.state == ReplayState.PREVIEWING and replay.total == incident.member_count
    before = time.monotonic()
    replay_preview_run(replay_id=replay.pk)
    print(f"preview of {replay.total} keys: {time.monotonic() - before:.2f} s")
    return replay, _counts(olga.get(started["Location"]).content.decode())


def _notes(replay: Replay) -> list[str]:
    return list(replay.items.exclude(note="").values_list("note", flat=True).distinct()[:5])


def _outcome_notes(replay: Replay) -> list[str]:
    """What the items that did not settle or send said, and the handoffs' last events: a failure's reasons."""
    odd = replay.items.exclude(outcome__in=[ReplayOutcome.SETTLED, ReplayOutcome.SENT])
    return [
        f"{item.outcome}: {item.outcome_note}; last event: "
        + str(HandoffEvent.objects.filter(handoff_id=item.handoff_id).values_list("reason").last())
        for item in odd[:5]
    ]


def _ran(olga: Client, replay: Replay) -> Replay:
    assert olga.post(f"/incidents/replays/{replay.pk}/run").status_code == 302
    return replay_run(replay_id=replay.pk)


def _exported(olga: Client, replay: Replay) -> list[dict]:
    exported = olga.get(f"/incidents/replays/{replay.pk}/items.csv")
    return list(csv.DictReader(io.StringIO(b"".join(exported.streaming_content).decode())))


@pytest.mark.long
def test_a_replay_of_a_thousand_previews_400_there_600_missing_and_sends_exactly_600(
    receiver, settings
):
    settings.ALERT_EMAILS = []
    olga = Client()
    olga.force_login(onboarding_world()["olga"])
    world = _world(receiver)
    handoffs, blind, incident = world["handoffs"], world["blind"], world["incident"]
    assert incident.member_count == MEMBERS

    replay, counts = _previewed(olga, incident)
    assert receiver.creates() == 0, "a preview only reads"
    assert counts["cannot be asked (needs a person)"] == 0, _notes(replay)
    assert counts == {
        "already there (will be settled, not sent)": THERE,
        "missing (will be sent)": MEMBERS - THERE,
        "cannot be asked (needs a person)": 0,
        "there with another payload (needs a person)": 0,
        "nothing to replay (settled, or on its way)": 0,
    }
    blind_replay, blind_counts = _previewed(olga, world["blind_incident"])
    assert blind_counts["cannot be asked (needs a person)"] == len(blind)

    asked_before = receiver.keys_asked()
    replay, blind_replay = _ran(olga, replay), _ran(olga, blind_replay)
    assert replay.state == ReplayState.DONE and replay.applied == MEMBERS
    assert replay.outcomes == {
        ReplayOutcome.SETTLED: THERE,
        ReplayOutcome.SENT: MEMBERS - THERE,
    }, _outcome_notes(replay)
    assert receiver.keys_asked() - asked_before == THERE, "each settled by asking the receiver"
    assert blind_replay.outcomes == {ReplayOutcome.LEFT: len(blind)}

    _dispatch_due(receiver)
    assert receiver.creates() == MEMBERS - THERE, "exactly the missing ones were sent"
    assert ReceiverTask.objects.using("delivery").count() == MEMBERS
    assert Handoff.objects.filter(state=HandoffState.DELIVERED).count() == MEMBERS
    assert not Attempt.objects.filter(handoff__in=handoffs[:THERE]).exists(), "none sent"
    assert Attempt.objects.filter(handoff__in=handoffs[THERE:]).count() == MEMBERS - THERE
    blind_states = Handoff.objects.filter(pk__in=[h.pk for h in blind]).values_list("state")
    assert set(blind_states) == {(HandoffState.NEEDS_ATTENTION,)}
    incidents_sync()
    incident.refresh_from_db()
    assert incident.state == IncidentState.RESOLVED and incident.resolved_by is None

    rows = _exported(olga, replay)
    assert len(rows) == MEMBERS and rows[0]["action_key"] == handoffs[0].action_key
    assert (rows[0]["preview"], rows[0]["result"]) == (
        "already there (will be settled, not sent)",
        "settled by lookup, not sent",
    )
    assert (rows[-1]["result"], rows[-1]["state_after"]) == (
        "sent again with the same key",
        HandoffState.PENDING,
    )
