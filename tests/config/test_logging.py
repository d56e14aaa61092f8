"""Log lines as the settings build them: JSON with LOG_FORMAT=json, plain by default, each with the fields the
code path bound (handoff, action key, destination, workspace, trace id) and redacted as screens are."""

import copy
import io
import json
import logging
import logging.config
import os
import re
import subprocess
import sys

import pytest
from django.conf import settings
from django.core.management import call_command
from django.test import RequestFactory
from django.urls import resolve, reverse

from config.log_middleware import RequestLogContext
from lib import log_context, telemetry
from outbox import redaction
from outbox.destinations import InProcessDestination
from outbox.dispatch.dispatcher import dispatch_batch
from outbox.redaction import REDACTED
from tests.builders import approve, record
from tests.factories import onboarding_world
from tests.processes import ROOT

SECRET = "metrics-test-token"  # the test settings' METRICS_TOKEN: a configured secret


def handler_as_configured(formatter: str) -> tuple[logging.Handler, io.StringIO]:
    """The settings' console handler (its filters and the named formatter), writing to a buffer."""
    config = logging.config.DictConfigurator(copy.deepcopy(settings.LOGGING))
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(config.configure_formatter(config.config["formatters"][formatter]))
    for name in config.config["handlers"]["console"]["filters"]:
        handler.addFilter(config.configure_filter(config.config["filters"][name]))
    return handler, stream


@pytest.fixture
def logged():
    """Log through the configured handler; returns what it wrote."""

    def write(formatter: str, emit, name: str = "tests.logging") -> str:
        handler, stream = handler_as_configured(formatter)
        logger = logging.getLogger(name)
        logger.addHandler(handler)
        try:
            emit(logger)
        finally:
            logger.removeHandler(handler)
        return stream.getvalue()

    return write


class Claim:
    def __init__(self, handoff_id, action_key, workspace_id=None):
        self.handoff_id, self.action_key = handoff_id, action_key
        if workspace_id is not None:
            self.workspace_id = workspace_id


def test_recorded_outcome_is_one_json_line_with_the_handoffs_fields(logged):
    claim = Claim(12, "onboarding:7:42:1", workspace_id=7)
    out = logged("json", lambda log: log_context.log_recorded(log, claim, "receiver", "delivered"))
    [line] = out.splitlines()
    event = json.loads(line)
    assert event["message"] == "onboarding:7:42:1 recorded delivered at receiver"
    assert event["level"] == "INFO" and event["logger"] == "tests.logging"
    assert (event["handoff_id"], event["action_key"]) == (12, "onboarding:7:42:1")
    assert (event["destination"], event["workspace"]) == ("receiver", 7)
    assert event["trace_id"] == "" and "time" in event
    # The fields held for that line only.
    assert log_context.current() == {}


@pytest.mark.django_db(databases=["default", "delivery"], transaction=True)
def test_the_dispatchers_record_step_writes_one_line_per_outcome(logged):
    handoff = approve(onboarding_world())
    out = logged(
        "json",
        lambda _log: call_command("dispatch", "--once", stdout=io.StringIO()),
        name="outbox.dispatch.dispatcher",
    )
    [event] = [json.loads(line) for line in out.splitlines() if '"handoff_id"' in line]
    assert (event["handoff_id"], event["action_key"]) == (handoff.pk, handoff.action_key)
    assert event["message"] == f"{handoff.action_key} recorded delivered at {handoff.destination}"


def test_a_refused_outcome_is_not_logged_as_recorded(logged):
    assert logged("json", lambda log: log_context.log_recorded(log, Claim(1, "k"), "r", None)) == ""


def test_secrets_and_addresses_are_redacted_in_message_traceback_and_fields(logged):
    def emit(log):
        log.warning("answer: Bearer %s from ops@example.com", SECRET, extra={"note": SECRET})
        try:
            raise RuntimeError(f"refused {SECRET}")
        except RuntimeError:
            log.exception("call failed")

    out = logged("json", emit)
    assert SECRET not in out and "ops@example.com" not in out
    first, second = (json.loads(line) for line in out.splitlines())
    assert first["message"] == "answer: Bearer [redacted] from [redacted]"
    assert first["note"] == "[redacted]"
    assert "RuntimeError: refused [redacted]" in second["exc_info"]


def test_plain_lines_are_redacted_too(logged):
    def emit(log):
        try:
            raise RuntimeError(SECRET)
        except RuntimeError:
            log.exception("token %s", SECRET)

    out = logged("plain", emit)
    assert SECRET not in out
    assert " ERROR tests.logging token [redacted]" in out.splitlines()[0]
    assert "RuntimeError: [redacted]" in out


def test_trace_id_is_the_current_spans(logged):
    sdk = pytest.importorskip("opentelemetry.sdk.trace")
    tracer = sdk.TracerProvider().get_tracer("tests")

    def emit(log):
        with tracer.start_as_current_span("work") as span:
            log.info("inside")
            emit.context = span.get_span_context()

    event = json.loads(logged("json", emit))
    assert event["trace_id"] == format(emit.context.trace_id, "032x")
    assert event["span_id"] == format(emit.context.span_id, "016x")


def test_a_handoffs_line_outside_a_span_takes_the_handoffs_trace_id_while_tracing_is_on(logged):
    sdk = pytest.importorskip("opentelemetry.sdk.trace")
    claim = Claim(12, "onboarding:7:42:1")
    off = json.loads(logged("json", lambda log: log_context.log_recorded(log, claim, "r", "x")))
    telemetry.install(sdk.TracerProvider())
    try:
        on = json.loads(logged("json", lambda log: log_context.log_recorded(log, claim, "r", "x")))
    finally:
        telemetry.install(None)
    assert off["trace_id"] == ""
    assert on["trace_id"] == format(telemetry.handoff_ids(claim.action_key)[0], "032x")


def test_a_request_binds_what_its_url_names_and_leaks_nothing_to_the_next():
    path = reverse("outbox:detail", args=[5])
    request = RequestFactory().get(path)
    request.resolver_match = resolve(path)
    seen = {}

    def view(request):
        middleware.process_view(request, None, (), request.resolver_match.kwargs)
        seen.update(log_context.current())

    middleware = RequestLogContext(view)
    with log_context.bound(action_key="left:over"):
        middleware(request)
        assert log_context.current() == {"action_key": "left:over"}
    assert seen == {"handoff_id": 5}


def test_unknown_context_field_is_refused():
    with pytest.raises(ValueError, match="not a log context field"):
        log_context.bind(password="x")


def test_an_unknown_log_format_stops_the_process_with_the_reason():
    done = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=ROOT,
        env={"DJANGO_SETTINGS_MODULE": "config.test_settings", "LOG_FORMAT": "xml", "PATH": ""},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "LOG_FORMAT must be one of plain, json, not 'xml'" in done.stderr


@pytest.mark.parametrize("formatter", ["plain", "json"])
def test_a_logged_url_has_its_credential_parameters_redacted_and_the_rest_kept(logged, formatter):
    """httpx logs each request's URL: a token or an OAuth code in its query must not reach the log."""
    url = "https://idp.example/callback?code=oauth-code-1&state=opaque-2&next=%2Fhome&api_key=k-3"
    text = logged(formatter, lambda log: log.info("HTTP Request: GET %s", url))
    for value in ("oauth-code-1", "opaque-2", "k-3"):
        assert value not in text
    assert "https://idp.example/callback?code=[redacted]&state=[redacted]&next=%2Fhome" in text


def test_plain_and_json_lines_carry_the_time_in_utc_with_its_zone(logged):
    import datetime

    plain = logged("plain", lambda log: log.warning("a security event"))
    stamp = plain.split(" ", 1)[0]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", stamp), plain
    now = datetime.datetime.now(datetime.UTC)
    written = datetime.datetime.fromisoformat(stamp)
    assert abs((now - written).total_seconds()) < 60, (stamp, now)
    line = json.loads(logged("json", lambda log: log.warning("a security event")))
    offset = datetime.datetime.fromisoformat(line["time"]).utcoffset()
    assert offset == datetime.timedelta(0), line["time"]


@pytest.mark.parametrize(
    "value",
    [
        "eve\r\n2026-01-01T00:00:00.000Z INFO approvals.auth.lockout sign-in of root by password",
        "eve\n",
        "eve\u2028forged",
        "eve\x1b[2Kforged",
        "eve\u202egrof",
    ],
)
def test_a_logged_value_cannot_forge_a_plain_line(logged, value):
    out = logged("plain", lambda log: log.warning("password sign-in refused for %s", value))
    assert out.endswith("\n") and len(out.splitlines()) == 1 and out.count("\n") == 1, out
    assert "\x1b" not in out and "\u202e" not in out
    assert out.split(" WARNING tests.logging ", 1)[1].startswith("password sign-in refused for eve")


@pytest.fixture
def secret_reads(monkeypatch):
    """How many times the configured secrets were read (every setting and the environment), counted."""
    reads = []
    read = redaction._read_configured_secrets

    def counted():
        reads.append(1)
        return read()

    monkeypatch.setattr(redaction, "_read_configured_secrets", counted)
    return reads


def test_a_json_line_reads_the_secrets_at_most_twice_and_the_next_line_sees_a_rotation(
    logged, secret_reads, monkeypatch
):
    """The message's filter reads them once, the formatter once for all the line's fields (it read them once
    per field); a value rotated between two lines is masked in the second."""
    monkeypatch.setenv("CRM_API_TOKEN", "crm-token-first-value")
    # The settings' handler only: the root's (the same filters again) would read them for its own line.
    monkeypatch.setattr(logging.getLogger("tests.logging"), "propagate", False)

    def emit(log):
        token = os.environ["CRM_API_TOKEN"]
        log.warning("sent with %s", token, extra={"note": token, "kind": "refusal", "where": "crm"})
        monkeypatch.setenv("CRM_API_TOKEN", "crm-token-after-rotation")
        token = os.environ["CRM_API_TOKEN"]
        log.warning("sent with %s", token, extra={"note": token, "kind": "refusal", "where": "crm"})

    out = logged("json", emit)
    events = [json.loads(line) for line in out.splitlines()]
    assert [(e["message"], e["note"]) for e in events] == [(f"sent with {REDACTED}", REDACTED)] * 2
    assert "crm-token" not in out
    assert len(secret_reads) <= 2 * len(events)


@pytest.mark.django_db(databases=["default", "delivery"], transaction=True)
def test_the_record_step_reads_the_secrets_once_for_its_batchs_lines(logged, secret_reads):
    """A line per outcome, each redacted, the secrets read once for the batch (they were read for each line)."""
    handoffs = [record(number) for number in (51, 52, 53, 54)]
    del secret_reads[:]

    def dispatch(_log):
        stats = dispatch_batch(destination=InProcessDestination(), worker="logs")
        assert stats.delivered == len(handoffs)

    out = logged("plain", dispatch, name="outbox.dispatch.dispatcher")
    assert [line.split(" ", 3)[3] for line in out.splitlines()] == [
        f"{h.action_key} recorded delivered at {h.destination}" for h in handoffs
    ]
    assert len(secret_reads) == 1
