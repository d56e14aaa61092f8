"""The pagerduty_events kind: PagerDuty Events API v2 (`POST /v2/enqueue`), one event per handoff.

The payload is the event without its routing key (`event_action` trigger, acknowledge or resolve, and
`dedup_key`); the routing key is read from the variable `routing_key_variable` names at each call, never stored.
PagerDuty answers 202 with the `dedup_key`, which is the delivery's id. PagerDuty deduplicates by
`dedup_key`: a trigger repeated while its alert is open joins it, an acknowledge or resolve repeated
changes nothing. So an unknown outcome (a lost answer, a dispatcher killed mid-call) is settled by sending
the same event again (`replays_same_key`); there is no lookup.
"""

import json

from outbox.destinations.webhook.destination import (
    KEYS,
    JsonPoster,
    check_keys,
    environment_secret,
)
from outbox.failures import Outgoing

PAGERDUTY_KEYS = (KEYS - {"secret_variable", "id_field"}) | {"routing_key_variable"}


class PagerDutyEventsDestination(JsonPoster):
    def __init__(self, config: dict):
        check_keys(config, "pagerduty_events", PAGERDUTY_KEYS)
        if (
            not isinstance(config.get("routing_key_variable"), str)
            or not config["routing_key_variable"]
        ):
            raise ValueError(
                "pagerduty_events destination: routing_key_variable must name a variable"
            )
        super().__init__(config)
        self.routing_key_variable = config["routing_key_variable"]

    def describe(self) -> str:
        return f"{self.name}: PagerDuty Events API v2 at {self.url}"

    def describe_contract(self) -> str:
        return "PagerDuty dedupes by dedup_key; no lookup: an unknown outcome is sent again"

    def request(self, outgoing: Outgoing) -> tuple[str, dict[str, str], str]:
        event = {**outgoing.payload, "routing_key": environment_secret(self.routing_key_variable)}
        return json.dumps(event, sort_keys=True), {}, str(outgoing.payload.get("dedup_key", ""))

    def credentials_missing(self) -> list[str]:
        try:
            environment_secret(self.routing_key_variable)
        except ValueError:
            return [f"routing_key_variable: ${self.routing_key_variable} is not set"]
        return []
