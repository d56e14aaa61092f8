"""A dispatcher host whose clock steps (issue 40's clock jump: libfaketime steps the monotonic clock too) still
records what its calls got: a call timed across a step back measures a negative latency, and the attempt's
column refuses one, which lost the whole batch's outcomes with it and stopped the dispatcher."""

import pytest

from outbox.dispatch.claims import handoff_claim_due
from outbox.failures import DeliveryResult
from outbox.models import Attempt, FailureClass, Handoff, HandoffState
from outbox.services.outcomes import handoff_record_outcomes
from tests.outbox.scripted_destination import ScriptedDestination

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])
S = HandoffState
# A call that took 65 ms while the host's clock stepped back five minutes.
STEPPED_BACK_MS = 65 - 300_000


def test_answers_timed_across_a_clock_stepped_back_are_recorded_with_no_latency(make_handoff):
    plain, failed = make_handoff(1), make_handoff(2)
    claims = {claim.handoff_id: claim for claim in handoff_claim_due(worker="d1")}
    recorded = handoff_record_outcomes(
        outcomes=[
            (
                claims[plain.pk],
                DeliveryResult.ok(task_id="t-1", created=True, latency_ms=STEPPED_BACK_MS),
            ),
            (
                claims[failed.pk],
                DeliveryResult.failed(
                    FailureClass.TRANSIENT, "http_503", "HTTP 503", latency_ms=STEPPED_BACK_MS
                ),
            ),
        ],
        destination=ScriptedDestination(),
    )

    assert recorded.states[0] == S.DELIVERED
    assert Handoff.objects.get(pk=plain.pk).state == S.DELIVERED
    assert Handoff.objects.get(pk=failed.pk).state != S.IN_FLIGHT
    latencies = Attempt.objects.filter(handoff__in=[plain, failed]).values_list(
        "latency_ms", flat=True
    )
    assert list(latencies) == [0, 0]
