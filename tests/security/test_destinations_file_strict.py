"""`manage.py destinations apply FILE` with hostile files: each is refused whole with one message naming
the place or the field, and the live destination is left as it was (no row, no event written)."""

import json
import os
import subprocess
import sys
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from outbox.models import DestinationConfig, DestinationEvent
from tests.processes import ROOT

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
        [sys.executable, "manage.py", "destinations", "apply", str(path)],
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
