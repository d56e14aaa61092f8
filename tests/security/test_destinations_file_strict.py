"""`manage.py destinations apply FILE` with hostile files: each is refused whole with one message naming
the place or the field, and the live destination is left as it was (no row, no event written)."""

import json
import os
import subprocess
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from lib.json_config import json_path
from outbox.destinations.http.destination import HttpDestination
from outbox.destinations.idempotency_key.auth import MissingSecret, credentials_from_config
from outbox.destinations.smtp.destination import Secret
from outbox.models import DestinationConfig, DestinationEvent
from tests.processes import ROOT, manage_argv

pytestmark = pytest.mark.django_db
LIVE = {"url": "http://127.0.0.1:9/delivery/api", "read_timeout": 5.0}


@pytest.fixture(autouse=True)
def live_receiver(monkeypatch):
    """The live receiver destination, as a row, and a signing secret under the destinations' prefix."""
    monkeypatch.setenv("HANDOFF_DEST_RECEIVER_SECRET", "whsec_c2VjcmV0LW9mLXRoZS1saXZlLXJlY2VpdmVy")
    return DestinationConfig.objects.create(name="receiver", kind="http", config=LIVE)


def rows() -> list:
    return list(DestinationConfig.objects.values_list("name", "kind", "enabled", "config"))


def refused(tmp_path, text: str) -> str:
    """The message of the refusal of a file holding `text`, after checking that nothing was written."""
    before, events = rows(), DestinationEvent.objects.count()
    path = tmp_path / "destinations.json"
    path.write_text(text)
    with pytest.raises(CommandError) as refusal:
        call_command("destinations", "apply", str(path), stdout=StringIO())
    assert rows() == before == [("receiver", "http", True, LIVE)]
    assert DestinationEvent.objects.count() == events
    return str(refusal.value)


def test_a_key_given_twice_is_refused_and_does_not_repoint_the_receiver(tmp_path):
    text = (
        '{"destinations": [{"name": "sec-dup", "name": "receiver", "kind": "http",'
        ' "url": "https://evil.example"}]}'
    )
    message = refused(tmp_path, text)
    assert "destinations[0].name: the key appears twice" in message


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_nan_and_infinity_are_refused_by_json_path(tmp_path, constant):
    text = (
        '{"destinations": [{"name": "receiver", "kind": "http",'
        f' "url": "http://127.0.0.1:9/x", "read_timeout": {constant}}}]}}'
    )
    message = refused(tmp_path, text)
    assert f"destinations[0].read_timeout: {constant} is not a JSON number" in message


def test_nesting_deeper_than_the_limit_is_refused_by_line_and_column(tmp_path):
    text = '{"destinations": [{"name": "receiver", "kind": "http", "retry": ' + "[" * 5000
    message = refused(tmp_path, text)
    # Levels 1-3 are the file's object, the list and the entry; the 30th bracket, at 65 + 29, is level 33.
    assert "line 1, column 94: nested deeper than 32 levels" in message


def test_a_file_larger_than_the_limit_is_refused_unread(tmp_path):
    entry = {"name": "receiver", "kind": "http", "url": "http://127.0.0.1:9/moved"}
    text = json.dumps({"destinations": [entry]}) + " " * (1024 * 1024)
    message = refused(tmp_path, text)
    assert "larger than 1048576 bytes" in message


def test_a_syntax_error_is_refused_by_line_and_column(tmp_path):
    message = refused(tmp_path, '{"destinations": [\n  {"name": "receiver",}\n]}')
    assert "line 2, column 23: Expecting property name" in message


def test_a_nul_in_a_text_is_refused_by_json_path(tmp_path):
    text = '{"destinations": [{"name": "receiver", "kind": "http", "url": "http://a\\u0000b"}]}'
    message = refused(tmp_path, text)
    assert "destinations[0].url: a text with a NUL character" in message


def test_the_command_exits_non_zero_with_one_line_and_no_traceback(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text('{"destinations": ' + "[" * 100_000)
    done = subprocess.run(
        manage_argv("destinations", "apply", str(path)),
        cwd=ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "config.test_settings"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    # The 33rd level is the 32nd "[", at column 18 + 31 (the lines before it are the start's log).
    assert done.stderr.strip().splitlines()[-1] == (
        f"CommandError: nothing applied: {path}: line 1, column 49: nested deeper than 32 levels"
    )


# An entry that would re-point the live receiver at another API: valid as it is (see the first test
# below); each refusal changes one field of it.
ACCOUNTS = {
    "name": "receiver",
    "kind": "idempotency_key_http",
    "url": "https://accounts.example/api",
    "auth": {"scheme": "bearer", "token_env": "HANDOFF_DEST_ACCOUNTS_TOKEN"},
    "create": {"path": "/v1/accounts"},
    "receipt": {"id": "account.id"},
}


def entry_refused(tmp_path, entry: dict) -> str:
    return refused(tmp_path, json.dumps({"destinations": [entry]}))


def test_the_entry_the_refusals_change_applies_as_it_is(tmp_path):
    path = tmp_path / "destinations.json"
    path.write_text(json.dumps({"destinations": [ACCOUNTS]}))
    call_command("destinations", "apply", str(path), stdout=StringIO())
    assert DestinationConfig.objects.get(name="receiver").kind == "idempotency_key_http"


@pytest.mark.parametrize(
    ("headers", "field", "reason"),
    [
        ({"X Bad": "1"}, 'headers["X Bad"]', "not an HTTP token"),
        ({"X-Team\r\nX-Injected": "1"}, 'headers["X-Team\\r\\nX-Injected"]', "not an HTTP token"),
        ({"X-Team": "ops\r\nX-Injected: 1"}, 'headers["X-Team"]', "not an HTTP field value"),
        ({"X-Team": "ops\nX-Injected: 1"}, 'headers["X-Team"]', "not an HTTP field value"),
        ({"X-Team": "ops\x07"}, 'headers["X-Team"]', "not an HTTP field value"),
        ({"Host": "evil.example"}, "headers.Host", "routes or frames the request"),
        ({"Content-Length": "0"}, 'headers["Content-Length"]', "routes or frames the request"),
    ],
)
def test_a_header_that_is_not_plain_http_is_refused_naming_it(tmp_path, headers, field, reason):
    message = entry_refused(tmp_path, {**ACCOUNTS, "headers": headers})
    assert f"destinations[0]: destination 'receiver' (idempotency_key_http): {field}: {reason}" in (
        message
    )


@pytest.mark.parametrize(
    "name",
    [
        "Connection",
        "Keep-Alive",
        "Proxy-Connection",
        "TE",
        "Trailer",
        "Transfer-Encoding",
        "Upgrade",
    ],
)
def test_a_hop_by_hop_header_is_refused_naming_it(tmp_path, name):
    message = entry_refused(tmp_path, {**ACCOUNTS, "headers": {name: "x"}})
    assert f"{json_path(('headers', name))}: routes or frames the request" in message


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"idempotency_header": "Transfer-Encoding"}, "idempotency_header"),
        ({"idempotency_header": "Idempotency Key"}, "idempotency_header"),
        ({"auth": {**ACCOUNTS["auth"], "scheme": "header", "header": "Host"}}, "auth.header"),
        (
            {"create": {"path": "/v1/accounts", "payload_hash_header": "X\nY"}},
            "payload_hash_header",
        ),
    ],
)
def test_a_header_named_elsewhere_is_held_to_the_same_rules(tmp_path, overrides, field):
    assert f"{field}: " in entry_refused(tmp_path, {**ACCOUNTS, **overrides})


NOT_UNDER = "must start with '/' and not '//' (a path under url)"
CONTROLS = "no backslash, space or control character"
CLIMBS = "a path under url, without '..' segments"


@pytest.mark.parametrize(
    ("create", "lookup", "reason"),
    [
        ("//evil.example/x", None, NOT_UNDER),
        ("/v1/../../admin", None, CLIMBS),
        ("/v1/%2e%2E/admin", None, CLIMBS),
        ("/v1\\admin", None, CONTROLS),
        ("/v1/\taccounts", None, CONTROLS),
        ("/v1/accounts%0d%0aHost:%20evil", None, CONTROLS),
        ("/v1/accounts", "//evil.example/{key}", NOT_UNDER),
    ],
)
def test_a_path_that_leaves_the_base_url_is_refused_naming_it(tmp_path, create, lookup, reason):
    entry = {**ACCOUNTS, "create": {"path": create}}
    if lookup:
        entry["lookup"] = {"path": lookup, "id": "account.id"}
    message = entry_refused(tmp_path, entry)
    assert (
        f"{'lookup' if lookup else 'create'}.path{'' if reason == NOT_UNDER else ':'} {reason}"
        in (message)
    )


@pytest.mark.parametrize(
    "variable",
    ["DJANGO_SECRET_KEY", "OIDC_RP_CLIENT_SECRET", "DATABASE_URL", "RECEIVER_SIGNING_SECRET"],
)
def test_a_token_from_a_variable_of_the_products_own_is_refused(tmp_path, variable):
    auth = {"scheme": "bearer", "token_env": variable}
    message = entry_refused(tmp_path, {**ACCOUNTS, "url": "https://evil.example", "auth": auth})
    assert f"auth.token_env: '{variable}' is not a destination's variable" in message
    assert "HANDOFF_DEST_" in message


def test_a_signing_secret_from_the_session_key_is_refused(tmp_path):
    entry = {"name": "receiver", "kind": "http", "url": "https://evil.example"}
    message = entry_refused(tmp_path, {**entry, "secret_env": "DJANGO_SECRET_KEY"})
    assert "secret_env: 'DJANGO_SECRET_KEY' is not a destination's variable" in message


@pytest.fixture
def secrets_dir(tmp_path, settings):
    directory = tmp_path / "secrets"
    directory.mkdir()
    settings.HANDOFF_SECRETS_DIR = directory
    return directory


@pytest.mark.parametrize("name", ["/etc/shadow", "../outside", "/etc/passwd"])
def test_a_token_file_outside_the_secrets_directory_is_refused(tmp_path, secrets_dir, name):
    (tmp_path / "outside").write_text("token\n")
    auth = {"scheme": "bearer", "token_file": name}
    message = entry_refused(tmp_path, {**ACCOUNTS, "auth": auth})
    assert f"auth.token_file: {name!r} is outside the secrets directory" in message


def test_a_link_in_the_secrets_directory_to_a_file_outside_is_refused(tmp_path, secrets_dir):
    (secrets_dir / "token").symlink_to("/etc/passwd")
    auth = {"scheme": "bearer", "token_file": str(secrets_dir / "token")}
    message = entry_refused(tmp_path, {**ACCOUNTS, "auth": auth})
    assert "auth.token_file: " in message and "is outside the secrets directory" in message


def test_a_token_file_in_the_secrets_directory_applies_and_is_listed_present(tmp_path, secrets_dir):
    (secrets_dir / "accounts-token").write_text("token-of-the-test\n")
    path = tmp_path / "destinations.json"
    auth = {"scheme": "bearer", "token_file": "accounts-token"}
    path.write_text(json.dumps({"destinations": [{**ACCOUNTS, "auth": auth}]}))
    call_command("destinations", "apply", str(path), stdout=StringIO())
    out = StringIO()
    call_command("destinations", "list", stdout=out)
    assert "secrets: accounts-token present" in out.getvalue()


def test_check_and_list_refuse_a_row_that_names_a_forbidden_place(live_receiver):
    """A row written before the rule (or by hand): `check` fails naming the field, `list` says REFUSED
    where it used to say "present", and the dispatchers cannot build it."""
    DestinationConfig.objects.create(
        name="crm",
        kind="idempotency_key_http",
        config={
            **{k: v for k, v in ACCOUNTS.items() if k not in {"name", "kind"}},
            "auth": {"scheme": "bearer", "token_file": "/etc/shadow"},
        },
    )
    with pytest.raises(CommandError) as refusal:
        call_command("destinations", "check", stdout=StringIO())
    assert "'crm'" in str(refusal.value)
    assert "auth.token_file: '/etc/shadow' is outside the secrets directory" in str(refusal.value)
    out = StringIO()
    call_command("destinations", "list", stdout=out)
    assert "secrets: /etc/shadow REFUSED" in out.getvalue()


def test_a_forbidden_place_is_refused_again_when_the_secret_is_read(settings, tmp_path):
    """Defence in depth: a destination built without the registry (or from a row changed since) still
    reads nothing from a variable or file it may not name."""
    settings.HANDOFF_SECRETS_DIR = tmp_path
    session_key = os.environ["DJANGO_SECRET_KEY"]
    for auth in (
        {"scheme": "bearer", "token_env": "DJANGO_SECRET_KEY"},
        {"scheme": "bearer", "token_file": "/etc/passwd"},
    ):
        with pytest.raises(
            MissingSecret, match="not a destination's variable|outside the secrets"
        ) as e:
            credentials_from_config(auth).headers()
        assert session_key not in str(e.value)
    with pytest.raises(ValueError, match="'DJANGO_SECRET_KEY' is not a destination's variable"):
        Secret(env="DJANGO_SECRET_KEY").read()
    with pytest.raises(ValueError, match="outside the secrets directory"):
        Secret(file="/etc/passwd").read()
    signer = HttpDestination(url="https://evil.example", secret_env="DJANGO_SECRET_KEY")
    assert not signer.secret_present()
    assert signer.credentials_missing() == [
        "secret_env: 'DJANGO_SECRET_KEY' is not a destination's variable: its name must start with "
        "HANDOFF_DEST_ (other variables hold the product's own secrets)"
    ]
