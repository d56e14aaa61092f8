"""A dispatcher SIGKILLed mid-call at each provider-style server (tests/providers/), while the provider holds
an answer it has already committed: exactly one effect per key at the provider, the handoff delivered with
the provider's id, by the provider's own contract (a lookup or a search; a repeat with the same key that
the provider replays, where it has no lookup). Each reached by its destinations and workflows files alone.
Real processes on PostgreSQL: the providers, the dispatchers (`manage.py dispatch`)."""

import os
import signal

import pytest

from outbox.models import Attempt, AttemptOutcome, Handoff, HandoffState
from tests.factories import onboarding_world
from tests.faults.conftest import START_DEADLINE_SECONDS
from tests.faults.test_dispatch_faults import run_out_lease, wait_until
from tests.providers.harness import ProviderProcess
from tests.providers.scenario import Flow, apply_files

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.faults,
    pytest.mark.django_db(databases=["default", "delivery"], transaction=True),
]
S = HandoffState
# The victim would give up after READ_TIMEOUT (the destinations files say 5 s) and record the outcome itself:
# it is killed well before, even when a loaded machine holds the test back for many seconds between seeing
# the held call and the kill. A lease outlasts one call (connect 1 s + read, and Salesforce's OAuth2 token
# fetch, 7 s: 33 s), in the dispatchers and in this process, which checks the files against its own lease;
# the killed victim's is run out.
READ_TIMEOUT = 25
LEASE_SECONDS = "35"

PROVIDERS = {
    "stripe": (
        "HANDOFF_DEST_STRIPE_SECRET_KEY",
        "billing_customer",
        {"client_name": "Northwind", "billing_email": "billing@northwind.example"},
    ),
    "salesforce": (
        "HANDOFF_DEST_SALESFORCE_CLIENT_SECRET",
        "crm_account",
        {"client_name": "Northwind", "plan": "standard"},
    ),
    "hubspot": (
        "HANDOFF_DEST_HUBSPOT_TOKEN",
        "crm_contact",
        {"contact_email": "ada@northwind.example", "first_name": "Ada"},
    ),
    "postmark": (
        "HANDOFF_DEST_POSTMARK_SERVER_TOKEN",
        "welcome_mail",
        {"client_name": "Northwind", "contact_email": "ada@northwind.example"},
    ),
}


@pytest.mark.parametrize("provider_name", sorted(PROVIDERS))
def test_a_dispatcher_killed_while_the_provider_holds_its_committed_answer_leaves_one_effect(
    processes,
    monkeypatch,
    tmp_path,
    provider_name,
    refused_port,
    settings,
):
    settings.HANDOFF_LEASE_SECONDS = int(LEASE_SECONDS)
    token_env, workflow, payload = PROVIDERS[provider_name]
    token = f"{provider_name}-kill-token"
    monkeypatch.setenv(token_env, token)
    provider = ProviderProcess(provider_name, token=token)
    try:
        apply_files(provider_name, provider.url, tmp_path, read_timeout=READ_TIMEOUT)
        handoff = Flow(world=onboarding_world(), workflow=workflow).approve(1, payload)
        provider.hold_next()
        overrides = {
            "HANDOFF_LEASE_SECONDS": LEASE_SECONDS,
            token_env: token,
            # The default destination (no receiver runs here) is served too and has nothing to do.
            "RECEIVER_URL": f"http://127.0.0.1:{refused_port}/delivery/api",
        }
        victim = processes.start_dispatcher("victim", **overrides)
        wait_until(
            lambda: provider.state()["held"] == 1,
            timeout=START_DEADLINE_SECONDS,
            what="the provider to commit the effect and hold its answer",
            procs=[victim],
        )
        assert provider.effects() == {handoff.action_key: 1}
        assert Handoff.objects.get(pk=handoff.pk).state == S.IN_FLIGHT
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait(timeout=10)
        provider.release()  # the held answer goes to a dead connection
        run_out_lease("victim")

        survivor = processes.start_dispatcher("survivor", **overrides)
        wait_until(
            lambda: Handoff.objects.get(pk=handoff.pk).state == S.DELIVERED,
            timeout=START_DEADLINE_SECONDS,
            what="the killed dispatcher's handoff to be settled",
            procs=[survivor],
        )
        processes.dispatch_once("sweeper", **overrides)
        processes.stop_all()
        settled = Handoff.objects.get(pk=handoff.pk)
        assert provider.effects() == {handoff.action_key: 1}, "exactly one effect for the key"
        [record] = provider.records()
        ids = {record.get(field) for field in ("id", "Id", "MessageID")} - {None}
        assert settled.destination_id in ids
        attempts = Attempt.objects.filter(handoff=handoff).order_by("number")
        assert attempts.first().outcome == AttemptOutcome.ABANDONED
    finally:
        provider.stop()
