"""The fields and the redaction of every log line, plain or JSON (`config/settings/logging.py` picks one).

- `ContextFields` copies what the code path bound (`lib/log_context.py`: handoff id, action key,
  destination, workspace) onto each record, and the trace id of OpenTelemetry's current span when that
  package is installed and a span is recording, so a log line joins its trace. Outside a span (the record
  step writes its line after the batch's statement) a line about a handoff takes the handoff's own trace
  id while tracing is on: `lib/telemetry.py` derives it from the action key. Empty otherwise.
- `RedactedMessage` passes the message through the one redaction function, as screens do: a secret or an
  e-mail address in an exception's text or a receiver's answer never reaches a log shipper.
- `JsonLines` is python-json-logger's formatter: one JSON object per line, every field redacted.
"""

import logging
import time
from typing import Any

from pythonjsonlogger.json import JsonFormatter

from lib import log_context, telemetry
from lib.control_characters import escaped_for_one_line
from outbox.redaction import redact, redact_text, secrets_read_once_within

try:  # The tracing engineer's dependency; logs work the same without it.
    from opentelemetry import trace as otel_trace
except ImportError:  # pragma: no cover - depends on what is installed
    otel_trace = None


def current_trace_ids() -> tuple[str, str]:
    """The current span's trace and span id in W3C hex, or empty strings when no span is recording."""
    if otel_trace is None:
        return "", ""
    context = otel_trace.get_current_span().get_span_context()
    if not context.is_valid:
        return "", ""
    return format(context.trace_id, "032x"), format(context.span_id, "016x")


class ContextFields(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        for name, value in log_context.current().items():
            if not hasattr(record, name):
                setattr(record, name, value)
        record.trace_id, record.span_id = current_trace_ids()
        action_key = getattr(record, "action_key", None)
        if not record.trace_id and action_key and telemetry.enabled():
            record.trace_id = format(telemetry.handoff_ids(str(action_key))[0], "032x")
        return True


class RedactedMessage(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if not isinstance(record.msg, dict):
            record.msg, record.args = redact_text(record.getMessage()), None
        return True


class PlainLines(logging.Formatter):
    """Django's plain lines: the time in UTC with its zone (ISO 8601), the message on one line whatever the
    values it quotes (a line break or control character is escaped, so no value forges a line), and a
    traceback redacted like the message."""

    converter = time.gmtime
    default_time_format = "%Y-%m-%dT%H:%M:%S"
    default_msec_format = "%s.%03dZ"

    def formatMessage(self, record) -> str:  # noqa: N802 - logging's name
        record.message = escaped_for_one_line(record.message)
        return super().formatMessage(record)

    def formatException(self, ei) -> str:  # noqa: N802 - logging's name
        return redact_text(super().formatException(ei))

    def formatStack(self, stack_info: str) -> str:  # noqa: N802 - logging's name
        return redact_text(super().formatStack(stack_info))


# Attributes some callers attach that are objects, not facts for a log line (Django's request logging
# passes the request itself).
_DROPPED = ("request", "server_time")


class JsonLines(JsonFormatter):
    def process_log_record(self, log_data: dict[str, Any]) -> dict[str, Any]:
        for name in _DROPPED:
            log_data.pop(name, None)
        with secrets_read_once_within():  # once for the line, not once for each of its fields
            return redact(super().process_log_record(log_data))
