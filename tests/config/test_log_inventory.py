"""Logs go only where the log inventory says (docs/observability.md "Log inventory", ASVS 5.0 16.1.1, 16.2.3):
every handler of every logger a process has once it is set up (the web app's settings, the dispatcher's and
the cluster's modules imported, django-q2's own logger) and every handler gunicorn is given, in both log
formats, writes to a destination the inventory lists. A file handler, a syslog or a network handler added
anywhere fails here until the inventory names it."""

import json
import os
import re
import subprocess
import sys

import pytest

from tests.processes import ROOT

OBSERVABILITY = ROOT / "docs" / "observability.md"

HANDLERS = r"""
import json, logging, runpy, sys
import django
django.setup()
# The modules each process starts from: they may add handlers of their own when imported.
import config.wsgi, django_q.cluster, django_q.conf, outbox.dispatch.runner  # noqa
gunicorn = runpy.run_path("gunicorn.conf.py")

def where(handler):
    if isinstance(handler, logging.FileHandler):
        return "file " + handler.baseFilename
    if isinstance(handler, logging.StreamHandler):
        stream = handler.stream
        for name in ("stderr", "stdout"):
            if stream in (getattr(sys, name), getattr(sys, "__%s__" % name)):
                return name
        return "stream " + repr(stream)
    if isinstance(handler, logging.NullHandler):
        return "nowhere"
    return "handler " + type(handler).__module__ + "." + type(handler).__qualname__

found = []
for name in ["root", *sorted(logging.Logger.manager.loggerDict)]:
    logger = logging.getLogger(None if name == "root" else name)
    if isinstance(logger, logging.Logger):
        found += [[name, where(h)] for h in logger.handlers]
for name, handler in gunicorn.get("logconfig_dict", {}).get("handlers", {}).items():
    stream = handler.get("stream", "ext://sys.stderr")
    kind = handler["class"]
    if kind == "logging.StreamHandler" and stream in ("ext://sys.stderr", "ext://sys.stdout"):
        found.append(["gunicorn " + name, stream.removeprefix("ext://sys.")])
    else:
        found.append(["gunicorn " + name, "handler " + kind])
print(json.dumps(found))
"""


def inventory_destinations() -> set[str]:
    """The first code span of each row of the inventory's destinations table."""
    text = OBSERVABILITY.read_text(encoding="utf-8")
    start = text.find("\n### Log inventory\n")
    assert start != -1, "docs/observability.md has no 'Log inventory' section"
    section = text[start + 1 :]
    following = re.search(r"^##+ ", section[4:], flags=re.MULTILINE)
    section = section[: following.start() + 4] if following else section
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    return {re.match(r"\| `([^`]+)`", row).group(1) for row in rows}


def handlers_with(log_format: str) -> list[list[str]]:
    env = {
        **{
            k: v for k, v in os.environ.items() if k not in ("LOG_FORMAT", "DJANGO_SETTINGS_MODULE")
        },
        "DJANGO_SETTINGS_MODULE": "config.test_settings",
        "LOG_FORMAT": log_format,
    }
    done = subprocess.run(
        [sys.executable, "-c", HANDLERS],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_inventory_names_each_destination_once_with_its_format_place_access_and_retention():
    text = OBSERVABILITY.read_text(encoding="utf-8")
    destinations = inventory_destinations()
    assert {"stderr", "stdout", "var/log/<server>.log"} <= destinations
    header = text[text.find("\n### Log inventory\n") :].split("\n| ", 1)[1].split("\n", 1)[0]
    for column in ("written by", "format", "kept where", "who may read", "retention"):
        assert column in header, column


@pytest.mark.parametrize("log_format", ["plain", "json"])
def test_every_configured_log_handler_writes_only_to_a_destination_on_the_inventory(log_format):
    listed = inventory_destinations()
    found = handlers_with(log_format)
    assert ["root", "stderr"] in found, found
    # A NullHandler (a library's, as urllib3 adds) writes nothing anywhere.
    unlisted = [[log, where] for log, where in found if where not in listed | {"nowhere"}]
    assert not unlisted, f"handlers writing where docs/observability.md lists nothing: {unlisted}"
