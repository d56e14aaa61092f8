"""One backoff schedule: a handoff's retries, the dispatcher's loops and a notification's resends."""

import random

import pytest

from incidents.channels.delivery import channel_destination
from incidents.models import AlertChannel, ChannelKind
from outbox.dispatch.runner import Backoff
from outbox.retry import RetryPolicy


class _Highest(random.Random):
    """Full jitter drawn at its top: the handoff's delay is then the schedule's ceiling itself."""

    def uniform(self, a: float, b: float) -> float:
        return b


def test_a_dispatcher_failing_for_hours_waits_its_cap_instead_of_crashing():
    backoff = Backoff(first=0.5, cap=10.0)
    delays = [backoff.failed() for _ in range(1100)]  # about three hours of a database that is gone
    assert max(delays) == 10.0
    assert delays[-1] == 10.0
    assert backoff.failures == 1100


@pytest.mark.parametrize("attempts", [1, 2, 3, 5, 6, 7, 40, 2000])
def test_handoffs_notifications_and_the_dispatcher_follow_one_schedule(settings, attempts):
    settings.ALERT_NOTIFICATION_RETRY_BASE_SECONDS = 10
    settings.ALERT_NOTIFICATION_RETRY_CAP_SECONDS = 300
    handoff = RetryPolicy(base_delay=10.0, max_delay=300.0).delay(attempts, rng=_Highest())
    # A notification is a handoff to its channel's destination, whose retry the settings give.
    channel = AlertChannel(kind=ChannelKind.WEBHOOK, target="https://pager.example/hook")
    _kind, config = channel_destination(channel)
    notification = RetryPolicy.from_config(config["retry"]).delay(attempts, rng=_Highest())
    dispatcher = Backoff(first=10.0, cap=300.0)
    for _ in range(attempts):
        loop = dispatcher.failed()
    assert handoff == notification == loop
    assert handoff == min(300.0, 10.0 * 2 ** min(attempts - 1, 10))
