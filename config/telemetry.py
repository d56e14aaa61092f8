"""The OpenTelemetry SDK of a process, set up only when an OTLP endpoint is configured
(`config/settings/telemetry.py`): spans are batched and exported over OTLP/HTTP (protobuf) by a background
thread, never on the caller's path. `lib.telemetry` opens the spans; this module only decides where they go.
"""

from django.conf import settings
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator

from lib import telemetry


class KeyedIds(IdGenerator):
    """Random ids, except for a handoff's root span (its approval), whose ids come from its action key
    (`lib.telemetry.handoff_ids`): every process that later works on the handoff joins that trace."""

    def __init__(self):
        self._random = RandomIdGenerator()

    def generate_trace_id(self) -> int:
        forced = telemetry.FORCED_IDS.get()
        return forced[0] if forced else self._random.generate_trace_id()

    def generate_span_id(self) -> int:
        forced = telemetry.FORCED_IDS.get()
        return forced[1] if forced else self._random.generate_span_id()

    def is_trace_id_random(self) -> bool:
        return telemetry.FORCED_IDS.get() is None


class KeptResource(Resource):
    """The process's resource, its hash computed once: the OTLP encoder groups every exported span by its
    resource, and the SDK's `Resource.__hash__` encodes the attributes as JSON at each call, half of the
    encoding's CPU a span (bench/tracing_bench.py). Equal to the resource it keeps; immutable as it is."""

    def __init__(self, resource: Resource):
        super().__init__(resource.attributes, resource.schema_url)
        self._hash = super().__hash__()

    def __hash__(self) -> int:
        return self._hash


def tracer_provider(*, endpoint: str, service_name: str, timeout: float = 10.0) -> TracerProvider:
    """A provider exporting to the OTLP/HTTP traces endpoint (`…/v1/traces`). Headers (an API key) come from
    OTEL_EXPORTER_OTLP_HEADERS / OTEL_EXPORTER_OTLP_TRACES_HEADERS, read by the exporter; the sampler from
    OTEL_TRACES_SAMPLER (parent-based, always on by default). Flushed at exit."""
    provider = TracerProvider(
        resource=KeptResource(Resource.create({"service.name": service_name})),
        id_generator=KeyedIds(),
    )
    provider.add_span_processor(
        BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint, timeout=timeout))
    )
    return provider


def configure() -> None:
    """Named by HANDOFF_TRACING_SETUP: called once per process, on its first span."""
    telemetry.install(
        tracer_provider(
            endpoint=settings.TRACING_OTLP_ENDPOINT, service_name=settings.TRACING_SERVICE_NAME
        )
    )
