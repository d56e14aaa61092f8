"""The webhook kind: one signed JSON POST per handoff, the product's own side effects (an incident's
notification to a webhook or a Slack-style channel, docs/incidents.md).

Its contract. The body is the handoff's payload; with `secret_variable` it is signed in the Standard Webhooks
format, and `webhook-id` is the payload's `id_field` (the notification's id) or else the action key: the
same on every attempt, the receiver's deduplication key (the Standard Webhooks spec asks receivers to
dedupe on it). Nothing can be asked about a message once sent (`supports_lookup` False), so an unknown
outcome (a lost answer, a dispatcher killed mid-call) is settled by sending the same message again under
the same `webhook-id` (`replays_same_key`): a receiver that dedupes sees one delivery.

A product-only kind (`product_only`): the incidents side writes its rows from alert channels, a
destinations file cannot name it. So `secret_variable` names whatever variable the channel names
(`AlertChannel.secret_env`, as before): it is not an `*_env` key, whose variables a destinations file may
name only as `HANDOFF_DEST_*` (`credentials/secret_places.py`).
"""

import json
import os
import time

import urllib3

from lib.telemetry import call_span, note, trace_headers
from outbox.destinations.base import Destination, LookupFailed, RemoteTask
from outbox.destinations.http.answers import CALL_FAILURES, answer_failure, call_failure
from outbox.destinations.http.connections import (
    Direct,
    Proxied,
    answer_of,
    proxy_for,
    without_credentials,
)
from outbox.failures import DeliveryResult, Outgoing
from outbox.models import FailureClass
from outbox.retry import RetryPolicy
from outbox.signing import signed_headers

KEYS = frozenset({"name", "url", "secret_variable", "id_field", "timeout", "retry"})
DEFAULT_TIMEOUT = 10.0


def check_keys(config: dict, kind: str, keys: frozenset[str]) -> None:
    unknown = sorted(set(config) - keys)
    if unknown:
        raise ValueError(f"{kind} destination: unknown configuration keys {', '.join(unknown)}")
    for key in ("name", "url"):
        if not isinstance(config.get(key), str) or not config[key].strip():
            raise ValueError(f"{kind} destination: {key} must be a non-empty text")
    if not config["url"].startswith(("http://", "https://")):
        raise ValueError(f"{kind} destination: url must start with http:// or https://")
    timeout = config.get("timeout", DEFAULT_TIMEOUT)
    if not isinstance(timeout, int | float) or isinstance(timeout, bool) or timeout <= 0:
        raise ValueError(f"{kind} destination: timeout must be a positive number of seconds")


def environment_secret(name: str) -> str:
    """The value of the variable the channel names; ValueError naming it when it is not set."""
    value = os.environ.get(name, "")
    if not value:
        raise ValueError(f"environment variable {name} is not set")
    return value


class JsonPoster(Destination):
    """One JSON POST per handoff to `url`; the kinds below say what the body and headers are."""

    supports_idempotency = True
    supports_lookup = False
    supports_batch = False
    replays_same_key = True
    product_only = True
    call_seconds_keys = ("timeout", "timeout")

    def __init__(self, config: dict):
        self.name, self.url = config["name"], config["url"]
        self.timeout = float(config.get("timeout", DEFAULT_TIMEOUT))
        # Connect and read each get `timeout`: one call ends within twice it.
        self.call_seconds = self.timeout * 2
        self.retry_policy = RetryPolicy.from_config(config.get("retry"))
        # The http kinds' connections: straight, or through the proxy the environment names for the URL.
        options = {
            "retries": False,
            "timeout": urllib3.Timeout(connect=self.timeout, read=self.timeout),
        }
        proxy = proxy_for(self.url)
        self.proxy = without_credentials(proxy) if proxy else None
        self._connections = (
            Proxied(self.url, proxy, options) if proxy else Direct(self.url, options)
        )

    @classmethod
    def from_config(cls, config: dict) -> "JsonPoster":
        return cls(config)

    def request(self, outgoing: Outgoing) -> tuple[str, dict[str, str], str]:
        """(body, headers, the id a delivery is recorded under); ValueError when it cannot be sent."""
        raise NotImplementedError

    def deliver(self, outgoing: Outgoing) -> DeliveryResult:
        with call_span(self.name, outgoing.action_key):
            result = self._deliver(outgoing)
            note(http_status=result.status_code or 0, failure_class=result.failure_class or "")
        return result

    def _deliver(self, outgoing: Outgoing) -> DeliveryResult:
        try:
            body, headers, delivery_id = self.request(outgoing)
        except ValueError as exc:
            return DeliveryResult.failed(FailureClass.CREDENTIAL, "credential_missing", str(exc))
        started = time.monotonic()
        try:
            answer = answer_of(
                self._connections,
                "POST",
                "",
                repeatable=False,
                body=body.encode(),
                headers=trace_headers({"Content-Type": "application/json", **headers}),
            )
        except CALL_FAILURES as exc:
            return call_failure(exc, proxy=self.proxy)
        latency_ms = int((time.monotonic() - started) * 1000)
        if 200 <= answer.status_code < 300:
            return DeliveryResult.ok(
                task_id=delivery_id,
                created=True,
                status_code=answer.status_code,
                latency_ms=latency_ms,
            )
        return answer_failure(answer, latency_ms)

    def lookup(self, action_key: str) -> RemoteTask | None:
        raise LookupFailed(f"{self.name} cannot be asked about a key")

    def list_keys(self, *, after: str = "", limit: int = 500) -> list[RemoteTask]:
        return []

    def close(self) -> None:
        self._connections.close()


class WebhookDestination(JsonPoster):
    """A webhook or Slack-style channel: the payload as the body, signed when `secret_variable` is given."""

    def __init__(self, config: dict):
        check_keys(config, "webhook", KEYS)
        super().__init__(config)
        self.secret_variable = config.get("secret_variable", "")
        self.id_field = config.get("id_field", "")

    def describe(self) -> str:
        signed = "signed (Standard Webhooks)" if self.secret_variable else "unsigned"
        return f"{self.name}: {signed} webhook to {self.url}"

    def describe_contract(self) -> str:
        return (
            "the receiver dedupes by webhook-id; no lookup: an unknown outcome is sent again under "
            "the same webhook-id"
        )

    def webhook_id(self, outgoing: Outgoing) -> str:
        value = outgoing.payload.get(self.id_field) if self.id_field else None
        return value if isinstance(value, str) and value else outgoing.action_key

    def request(self, outgoing: Outgoing) -> tuple[str, dict[str, str], str]:
        body = json.dumps(outgoing.payload, sort_keys=True)
        webhook_id = self.webhook_id(outgoing)
        if not self.secret_variable:
            return body, {"webhook-id": webhook_id}, webhook_id
        headers = signed_headers(
            body, secret=environment_secret(self.secret_variable), message_id=webhook_id
        )
        return body, headers, webhook_id

    def credentials_missing(self) -> list[str]:
        if self.secret_variable and not os.environ.get(self.secret_variable):
            return [f"secret_variable: ${self.secret_variable} is not set"]
        return []
