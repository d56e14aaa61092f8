"""The scripted OpenID provider (tests/oidc_provider/scripted_provider.py) in a process of its own, and the
code flow run through it with the Django test client: the console's own views and backend, real HTTP to
the provider for the token, the keys and userinfo."""

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from django.test import Client

from tests.processes import LOCAL_HTTP, ROOT

CLIENT_ID = "handoff-console"
CLIENT_SECRET = "scripted-client-secret"
START_DEADLINE_SECONDS = 30.0


@dataclass
class ScriptedProvider:
    issuer: str
    script: Path
    process: subprocess.Popen

    def will_answer(self, id_token: dict, userinfo: dict | None = None) -> None:
        """The claims of the next sign-on: the ID token's and, apart if given, the userinfo answer's."""
        script = {"id_token": id_token}
        if userinfo is not None:
            script["userinfo"] = userinfo
        self.script.write_text(json.dumps(script))

    def token_requests(self) -> int:
        """How many code exchanges the console asked the provider for (each callback makes one)."""
        return LOCAL_HTTP.get(f"{self.issuer}/stats", timeout=START_DEADLINE_SECONDS).json()[
            "token_requests"
        ]

    def configure(self, settings) -> None:
        settings.OIDC_ENABLED = True
        settings.OIDC_OP_ISSUER = self.issuer
        settings.OIDC_OP_AUTHORIZATION_ENDPOINT = f"{self.issuer}/authorize"
        settings.OIDC_OP_TOKEN_ENDPOINT = f"{self.issuer}/token"
        settings.OIDC_OP_USER_ENDPOINT = f"{self.issuer}/userinfo"
        settings.OIDC_OP_JWKS_ENDPOINT = f"{self.issuer}/jwks"
        settings.OIDC_RP_CLIENT_ID = CLIENT_ID
        settings.OIDC_RP_CLIENT_SECRET = CLIENT_SECRET
        settings.OIDC_RP_SIGN_ALGO = "RS256"
        settings.OIDC_RP_IDP_SIGN_KEY = None
        # The console's calls to the provider (code exchange, keys, user info) wait as long as the test's
        # own: with the product's 5 s, a loaded machine that kept the provider's process from answering that
        # long failed the sign-on, and the test, on timing.
        settings.OIDC_TIMEOUT = START_DEADLINE_SECONDS


def scripted_provider_start(tmp: Path) -> ScriptedProvider:
    script = tmp / "script.json"
    script.write_text("{}")
    process = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "tests" / "oidc_provider" / "scripted_provider.py"),
            str(script),
            CLIENT_ID,
            CLIENT_SECRET,
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    # The provider prints its address once it is bound; a loaded machine may take a while to start it.
    line = process.stdout.readline().strip()
    if not line.startswith("listening on "):
        process.kill()
        raise RuntimeError(f"the scripted provider did not start: {line!r}")
    return ScriptedProvider(line.removeprefix("listening on "), script, process)


def sign_on(client: Client) -> str:
    """One round trip: the console's redirect, the provider's code, the console's callback.

    Returns where the callback sent the browser (the console's home, or the sign-in page saying why)."""
    start = client.get("/accounts/oidc/authenticate/")
    assert start.status_code == 302, start
    at_provider = LOCAL_HTTP.get(
        start["Location"], follow_redirects=False, timeout=START_DEADLINE_SECONDS
    )
    assert at_provider.status_code == 302, at_provider.text
    back = at_provider.headers["Location"].removeprefix("http://testserver")
    answer = client.get(back)
    assert answer.status_code == 302, answer
    return answer["Location"]


def bogus_callback(client: Client):
    """A callback with a state of the client's own session and a code the provider never issued."""
    start = client.get("/accounts/oidc/authenticate/")
    state = parse_qs(urlsplit(start["Location"]).query)["state"][0]
    return client.get("/accounts/oidc/callback/", {"code": "made-up-code", "state": state})


@pytest.fixture(scope="module")
def scripted_provider(tmp_path_factory):
    """One provider process for a test module; each test scripts the claims of its sign-ons."""
    started = scripted_provider_start(tmp_path_factory.mktemp("scripted-provider"))
    yield started
    started.process.kill()
    started.process.wait(timeout=30)
