"""`manage.py destinations probe NAME` (issue 35, "prove after") against the provider-style test servers
(each a process of its own), configured by their files alone: the whole contract run with a probe key, each
part's verdict with its evidence, effects counted at the provider; no handoff and no attempt written, one
DestinationEvent "probe"."""

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from outbox.models import Attempt, DestinationEvent, Handoff
from tests.console.views.test_destination_probe import retry_after_hold
from tests.providers.harness import ProviderProcess
from tests.providers.scenario import FILES

pytestmark = pytest.mark.django_db(databases=["default", "delivery"], transaction=True)
SALESFORCE_SECRET = "salesforce-consumer-secret"
STRIPE_KEY = "sk_test_" + "51Handoff0000000000000000"
KEY = "probe:7f3a2b"


def apply(tmp_path, provider: str, url: str, **changes) -> None:
    document = json.loads((FILES / f"{provider}.destinations.json").read_text())
    [destination] = document["destinations"]
    destination.update(url=url, **changes)
    for name in [name for name, value in changes.items() if value is None]:
        del destination[name]  # left out of the file
    if "token_url" in destination["auth"]:
        destination["auth"]["token_url"] = f"{url}/services/oauth2/token"
    path = tmp_path / "destinations.json"
    path.write_text(json.dumps(document))
    call_command("destinations", "apply", str(path), stdout=StringIO())


def probe(name: str, *args) -> tuple[str, str]:
    out = StringIO()
    try:
        call_command("destinations", "probe", name, "--key", KEY, *args, stdout=out)
    except CommandError as exc:
        return out.getvalue(), str(exc)
    return out.getvalue(), ""


def verdicts(out: str) -> dict[str, str]:
    parts = [line.strip().split(": ", 2) for line in out.splitlines() if line.startswith("  ")]
    return {name: f"{verdict}: {evidence}" for name, verdict, evidence in parts}


@pytest.fixture
def salesforce(monkeypatch):
    monkeypatch.setenv("HANDOFF_DEST_SALESFORCE_CLIENT_SECRET", SALESFORCE_SECRET)
    provider = ProviderProcess("salesforce", token=SALESFORCE_SECRET)
    yield provider
    provider.stop()


@pytest.fixture
def stripe(monkeypatch):
    monkeypatch.setenv("HANDOFF_DEST_STRIPE_SECRET_KEY", STRIPE_KEY)
    provider = ProviderProcess("stripe", token=STRIPE_KEY)
    yield provider
    provider.stop()


def nothing_but_the_probe_event(name: str) -> DestinationEvent:
    assert not Handoff.objects.exists() and not Attempt.objects.exists()
    [event] = DestinationEvent.objects.filter(destination=name, action="probe")
    return event


def test_a_good_contract_passes_every_part_and_leaves_nothing_behind(salesforce, tmp_path):
    apply(tmp_path, "salesforce", salesforce.url)
    out, failed = probe("salesforce-accounts")
    assert failed == ""
    parts = verdicts(out)
    assert list(parts) == ["create", "receipt", "repeat", "lookup", "undo"]
    assert all(verdict.startswith("ok: ") for verdict in parts.values()), out
    assert parts["create"].startswith("ok: HTTP 201 in ") and " ms" in parts["create"]
    assert parts["repeat"].startswith("ok: HTTP 200 in ") and "same id 001T" in parts["repeat"]
    assert "the fields sent match" in parts["lookup"]
    assert "HTTP 204" in parts["undo"] and "the lookup finds nothing" in parts["undo"]
    assert salesforce.effects() == {}, "the probe's record is undone: zero effects for its key"
    assert len(salesforce.requests("PATCH")) == 2, "create and repeat, one record"
    assert SALESFORCE_SECRET not in out
    event = nothing_but_the_probe_event("salesforce-accounts")
    assert event.reason.startswith(f"probe {KEY}: ok") and "undo: ok" in event.reason


def test_a_wrong_receipt_path_fails_the_receipt_part_with_its_evidence(salesforce, tmp_path):
    apply(tmp_path, "salesforce", salesforce.url, receipt={"id": "data.id"})
    out, failed = probe("salesforce-accounts")
    assert "salesforce-accounts: the contract failed its probe" in failed
    parts = verdicts(out)
    assert parts["create"].startswith("ok: HTTP 201")
    assert parts["receipt"].startswith("failed: HTTP 201 without a valid receipt")
    assert "data.id: no 'data' in the answer" in parts["receipt"]
    assert parts["repeat"].startswith("skipped: ")
    assert parts["lookup"].startswith("ok: found id 001T")
    assert parts["undo"].startswith("ok: "), "the record the lookup found is undone"
    assert salesforce.effects() == {}
    event = nothing_but_the_probe_event("salesforce-accounts")
    assert event.reason.startswith(f"probe {KEY}: failed") and "receipt: failed" in event.reason


def test_without_lookup_and_undo_those_parts_are_skipped_saying_why(stripe, tmp_path):
    apply(tmp_path, "stripe", stripe.url, undo=None)
    out, failed = probe("stripe-customers", "--body", '{"email": "probe@example.com"}')
    assert failed == ""
    parts = verdicts(out)
    assert parts["create"].startswith("ok: HTTP 200") and parts["receipt"].startswith("ok: id cus_")
    assert "same id cus_" in parts["repeat"] and "answered as a replay" in parts["repeat"]
    assert parts["lookup"].startswith("skipped: no lookup configured")
    assert parts["undo"].startswith("skipped: no undo configured")
    assert "stays there" in parts["undo"]
    assert stripe.effects() == {KEY: 1}, "one customer for the probe key, the repeat replayed"
    nothing_but_the_probe_event("stripe-customers")


@pytest.mark.parametrize(
    "body, why",
    [
        (
            '{"email": "a@example.com", "email": "probe@example.com"}',
            "email: the key appears twice",
        ),
        ('{"email": "probe@example.com", "seats": NaN}', "seats: NaN is not a JSON number"),
        ('["probe@example.com"]', "--body must be a JSON object"),
    ],
    ids=["key twice", "NaN", "not an object"],
)
def test_a_body_that_is_not_strict_json_is_refused_naming_why_and_nothing_is_sent(
    stripe, tmp_path, body, why
):
    apply(tmp_path, "stripe", stripe.url)
    with pytest.raises(CommandError) as refused:
        call_command("destinations", "probe", "stripe-customers", "--key", KEY, "--body", body)
    assert why in str(refused.value) and str(refused.value).startswith("nothing sent: ")
    assert refused.value.returncode == 1
    assert stripe.requests() == []
    assert not DestinationEvent.objects.filter(action="probe").exists()


def test_a_key_that_is_no_probe_key_is_refused_and_nothing_is_sent(stripe, tmp_path):
    apply(tmp_path, "stripe", stripe.url)
    with pytest.raises(CommandError) as refused:
        call_command("destinations", "probe", "stripe-customers", "--key", "onboarding:7:1:1:1")
    assert "a probe key starts with 'probe:'" in str(refused.value)
    assert stripe.requests() == []
    assert not DestinationEvent.objects.filter(action="probe").exists()


@pytest.mark.parametrize("hold", ["operator's pause", "Retry-After hold"])
def test_a_held_destination_is_not_probed_unless_the_person_says_they_mean_it(
    stripe, tmp_path, hold
):
    apply(tmp_path, "stripe", stripe.url, undo=None)
    if hold == "operator's pause":
        call_command(
            "destinations", "pause", "stripe-customers", "--reason", "upgrade", stdout=StringIO()
        )
        words = "Paused by an operator: upgrade"
    else:
        retry_after_hold("stripe-customers")
        words = "Retry-After hold: HTTP 429 with Retry-After 300 s"

    with pytest.raises(CommandError) as refused:
        call_command("destinations", "probe", "stripe-customers", "--key", KEY, stdout=StringIO())
    assert str(refused.value).startswith(
        f"not probed, nothing sent: stripe-customers is held ({words} · since "
    )
    assert str(refused.value).endswith("; --despite-holds to probe it anyway")
    assert refused.value.returncode == 1
    assert stripe.requests() == []
    assert not DestinationEvent.objects.filter(action="probe").exists()

    out, failed = probe("stripe-customers", "--despite-holds")
    assert failed == "" and out.startswith(f"held ({words} · since ")
    assert stripe.effects() == {KEY: 1}
    event = nothing_but_the_probe_event("stripe-customers")
    assert event.reason.startswith(f"probe {KEY}: ok (sent despite its holds: {words} · since ")
