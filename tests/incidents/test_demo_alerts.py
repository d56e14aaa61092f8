"""The demo's alert channels and its receiver of alerts: workspace 7 gets a page and a queue channel to the
sink (run twice, the same two), and the sink, a real process, keeps what it is sent and lists it."""

import os
import subprocess

import httpx
import pytest
from django.core.management import call_command

from incidents.models import AlertChannel, ChannelKind, IncidentSeverity
from tests.processes import ROOT, manage_argv

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])


def test_the_demo_gives_workspace_7_a_page_and_a_queue_channel_to_its_sink(monkeypatch):
    monkeypatch.setenv("DEMO_ALERT_PORT", "8026")
    call_command("demo_alert_channels")
    call_command("demo_alert_channels")
    channels = {c.name: c for c in AlertChannel.objects.filter(workspace_id=7)}
    assert set(channels) == {"demo pager", "demo queue"}
    assert channels["demo pager"].severity == IncidentSeverity.PAGE
    assert channels["demo pager"].kind == ChannelKind.WEBHOOK
    assert channels["demo pager"].target == "http://127.0.0.1:8026/page"
    assert channels["demo queue"].severity == IncidentSeverity.QUEUE


def test_the_demo_sink_keeps_and_lists_what_it_receives(tmp_path):
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.test_settings",
        # The kernel chooses the port: the sink prints the one it listens on.
        "DEMO_ALERT_PORT": "0",
        "DEMO_ALERT_DIR": str(tmp_path / "alerts"),
    }
    sink = subprocess.Popen(
        manage_argv("demo_alert_sink"),
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        # Listening once it prints its address (EOF, an empty line, if it could not start).
        line = sink.stdout.readline()
        assert "http://127.0.0.1:" in line, f"the sink did not start: {line!r}"
        port = int(line.rsplit(":", 1)[1].strip("/\n"))
        answer = httpx.post(
            f"http://127.0.0.1:{port}/page",
            content=b'{"id": "incident-3-1"}',
            headers={"webhook-id": "incident-3-1"},
        )
        assert answer.status_code == 202
        listing = httpx.get(f"http://127.0.0.1:{port}/").text
        assert "Notifications received (1)" in listing and "incident-3-1" in listing
    finally:
        sink.terminate()
        # It stops at once when idle; beside other work at a load of 20-28 it once took over 15 s.
        sink.wait(timeout=120)
