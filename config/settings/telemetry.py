"""Settings of tracing (docs/observability.md); imported by `config.settings`.

Off unless an OTLP endpoint is named, by the standard OpenTelemetry variables: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
(the full URL of the traces endpoint) or OTEL_EXPORTER_OTLP_ENDPOINT (its base; `/v1/traces` is added).
OTEL_SDK_DISABLED=true turns it off whatever is named.
"""

import os

from config.env import env_bool


def _traces_endpoint() -> str:
    if env_bool("OTEL_SDK_DISABLED", False):
        return ""
    if traces := os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip():
        return traces
    if base := os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip():
        return base.rstrip("/") + "/v1/traces"
    return ""


TRACING_OTLP_ENDPOINT = _traces_endpoint()
TRACING_SERVICE_NAME = os.environ.get("OTEL_SERVICE_NAME", "") or "handoff-console"
# What sets the SDK up on a process's first span; empty: no SDK, every span call a no-op.
HANDOFF_TRACING_SETUP = "config.telemetry.configure" if TRACING_OTLP_ENDPOINT else ""
