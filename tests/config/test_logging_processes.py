"""JSON log lines from real processes: a `manage.py dispatch --once` delivering an approved handoff to the
bundled receiver under gunicorn, both with LOG_FORMAT=json, and a process logging a configured secret."""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from outbox.models import HandoffState
from tests.faults.conftest import START_DEADLINE_SECONDS, Processes
from tests.faults.test_django_q import approve_request_42
from tests.processes import LOCAL_HTTP, ROOT, manage_argv

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.faults,
    pytest.mark.django_db(databases=["default", "delivery"], transaction=True),
]


@pytest.fixture
def processes(transactional_db, tmp_path):
    procs = Processes(tmp_path)
    yield procs
    procs.stop_all()


def json_lines(text: str) -> list[dict]:
    """Every line parsed as one JSON object (a line that is not fails the test with the line)."""
    events = []
    for line in text.splitlines():
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            pytest.fail(f"not a JSON line: {line!r}")
    return events


def secrets_of(env: dict) -> list[str]:
    return [
        env[name]
        for name in ("RECEIVER_SIGNING_SECRET", "METRICS_TOKEN", "DJANGO_SECRET_KEY")
        if env.get(name)
    ]


def test_dispatch_process_writes_json_lines_with_the_handoffs_fields(processes):
    processes.start_receiver()
    handoff = approve_request_42()
    env = processes.dispatcher_env(LOG_FORMAT="json")
    done = subprocess.run(
        manage_argv("dispatch", "--once", "--worker", "json-logs"),
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    handoff.refresh_from_db()
    assert handoff.state == HandoffState.DELIVERED

    events = json_lines(done.stderr)
    recorded = [e for e in events if e.get("handoff_id") == handoff.pk]
    assert recorded, done.stderr
    [event] = recorded
    assert event["action_key"] == handoff.action_key == "onboarding:7:42:1"
    assert event["destination"] == handoff.destination
    assert event["workspace"] == handoff.workspace_id == 7
    assert event["message"] == f"{handoff.action_key} recorded delivered at {handoff.destination}"
    assert {"time", "level", "logger", "trace_id"} <= set(event)
    for secret in secrets_of(env):
        assert secret not in done.stdout + done.stderr


def test_a_process_logging_a_secret_writes_it_redacted(processes):
    env = processes.dispatcher_env(LOG_FORMAT="json")
    code = (
        "import django, logging, os; django.setup(); "
        "logging.getLogger('outbox.dispatch.runner').error('refused with %s', os.environ['METRICS_TOKEN'])"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    [event] = [e for e in json_lines(done.stderr) if e["logger"] == "outbox.dispatch.runner"]
    assert event["message"] == "refused with [redacted]"
    for secret in secrets_of(env):
        assert secret not in done.stderr


def test_gunicorn_writes_its_own_lines_as_json_too(processes):
    """With LOG_FORMAT=json nothing of a gunicorn process is a plain line: its master's start and its
    workers' boot (gunicorn's loggers), and the app's lines of a refused request."""
    processes.base_env["LOG_FORMAT"] = "json"
    receiver = processes.start_receiver()
    assert httpx.get(f"{receiver}/tasks", timeout=10).status_code == 401
    processes.receiver.send_signal(signal.SIGTERM)
    processes.receiver.wait(timeout=60)

    events = json_lines(processes.receiver.log_path.read_text())
    loggers = {e["logger"] for e in events}
    assert "gunicorn.error" in loggers, events
    assert any(e["message"].startswith("Booting worker") for e in events), events
    assert all({"time", "level", "logger", "message"} <= set(e) for e in events)


def test_a_python_warning_is_a_json_line_too(processes):
    """A warning (gunicorn's worker warned of a missing static directory on a fresh clone) is no plain line."""
    env = processes.dispatcher_env(LOG_FORMAT="json")
    code = "import django, warnings; django.setup(); warnings.warn('No directory at: static')"
    done = subprocess.run(
        [sys.executable, "-W", "always", "-c", code],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    [event] = [e for e in json_lines(done.stderr) if e["logger"] == "py.warnings"]
    assert "UserWarning: No directory at: static" in event["message"]


# Not a configured secret: only the query-string rule can mask it.
QUERY_TOKEN = "query-token-not-configured-4711"


def _gunicorn_with_access_log(processes: Processes) -> tuple[str, "subprocess.Popen"]:
    held = processes.port()
    web = processes._spawn(
        [
            str(Path(sys.executable).with_name("gunicorn")),
            "config.wsgi",
            "--bind",
            "fd://{fd}",
            "--workers",
            "1",
            "--access-logfile",
            "-",
        ],
        processes.base_env,
        "web.log",
        listen=held,
    )
    base = f"http://127.0.0.1:{held.port}"
    deadline = time.monotonic() + START_DEADLINE_SECONDS
    while time.monotonic() < deadline:
        try:
            LOCAL_HTTP.get(f"{base}/healthz", timeout=1)
            return base, web
        except httpx.HTTPError:
            time.sleep(0.2)
    pytest.fail("gunicorn did not start:\n" + web.log_path.read_text()[-3000:])


@pytest.mark.parametrize("log_format", ["plain", "json"])
def test_gunicorns_access_log_redacts_a_token_in_the_query_string(processes, log_format):
    """`GET /metrics?token=` is refused, and the access log keeps the path and the other parameters but
    not the token (gunicorn wrote the whole request line)."""
    processes.base_env["LOG_FORMAT"] = log_format
    base, web = _gunicorn_with_access_log(processes)
    answer = httpx.get(
        f"{base}/metrics?format=text&token={QUERY_TOKEN}&id_token=idt-99", timeout=10
    )
    assert answer.status_code == 401
    web.send_signal(signal.SIGTERM)
    web.wait(timeout=60)

    log = web.log_path.read_text()
    assert QUERY_TOKEN not in log and "idt-99" not in log
    [line] = [line for line in log.splitlines() if "GET /metrics" in line]
    assert "/metrics?format=text&token=[redacted]&id_token=[redacted]" in line
    if log_format == "json":
        assert json.loads(line)["logger"] == "gunicorn.access"
