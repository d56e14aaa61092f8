"""Single sign-on end to end: Chromium, the console under live_server, and a real OpenID Connect provider
(the npm package oidc-provider, tests/oidc_provider/) on 127.0.0.1 in a process of its own.

A person signs in at the provider and gets the workspace roles of their groups; signing out ends the
provider's session too; after their group is removed at the provider, the next sign-in takes the role away;
with local passwords off, the console's password form is refused."""

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import expect

from approvals.models import Membership, Role, RoleChange
from tests.factories import make_workspace
from tests.processes import LOCAL_HTTP, ROOT, KernelPort, popen_listening

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(databases=["default", "delivery"], transaction=True),
]

PROVIDER_DIR = ROOT / "tests" / "oidc_provider"
CLIENT_ID = "handoff-console"
CLIENT_SECRET = "provider-test-client-secret"
START_DEADLINE_SECONDS = 120.0
APPROVERS, OPERATORS = "handoff-ws7-approvers", "handoff-ws7-operators"
MAPPING = {
    APPROVERS: [{"workspace": 7, "role": "approver"}],
    OPERATORS: [{"workspace": 7, "role": "operator"}],
}


@pytest.fixture(scope="session")
def provider_packages():
    """oidc-provider installed from the committed lock file (node_modules/ is git-ignored)."""
    npm = shutil.which("npm")
    if npm is None:
        pytest.fail("npm is needed for the single sign-on journey (Node 20 or later)")
    if not (PROVIDER_DIR / "node_modules" / "oidc-provider").is_dir():
        subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund"], cwd=PROVIDER_DIR, check=True, timeout=300
        )
    return PROVIDER_DIR


def _wait_for_discovery(process, issuer: str, log: Path) -> dict:
    deadline = time.monotonic() + START_DEADLINE_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"oidc-provider exited: {log.read_text()}")
        try:
            answer = LOCAL_HTTP.get(f"{issuer}/.well-known/openid-configuration", timeout=2)
            if answer.status_code == 200:
                return answer.json()
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    pytest.fail(
        f"oidc-provider did not answer within {START_DEADLINE_SECONDS} s: {log.read_text()}"
    )


@pytest.fixture
def provider(provider_packages, live_server, tmp_path):
    """The provider in its own process; `users` is the file it reads at every sign-in."""
    held = KernelPort()
    port = held.port
    users = tmp_path / "users.json"
    users.write_text(json.dumps({"dana": {"email": "dana@example.test", "groups": []}}))
    log = tmp_path / "oidc-provider.log"
    env = {
        **os.environ,
        "OIDC_TEST_PORT": str(port),
        "OIDC_TEST_CLIENT_ID": CLIENT_ID,
        "OIDC_TEST_CLIENT_SECRET": CLIENT_SECRET,
        "OIDC_TEST_REDIRECT_URI": f"{live_server.url}/accounts/oidc/callback/",
        "OIDC_TEST_POST_LOGOUT_REDIRECT_URI": f"{live_server.url}/accounts/login/",
        "OIDC_TEST_USERS": str(users),
    }
    with log.open("w") as out:
        process = popen_listening(
            lambda fd: ["env", f"OIDC_TEST_FD={fd}", "node", "provider.js"],
            held,
            cwd=provider_packages,
            env=env,
            stdout=out,
            stderr=out,
        )
    try:
        discovery = _wait_for_discovery(process, f"http://127.0.0.1:{port}", log)
        yield {"discovery": discovery, "users": users}
    finally:
        process.terminate()
        # A loaded machine may take more than seconds to run the process's shutdown; then it is killed.
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        held.close()


@pytest.fixture
def sso_on(settings, provider):
    """The console configured as docs/sso.md says, against the provider's discovery document."""
    found = provider["discovery"]
    settings.OIDC_ENABLED = True
    settings.OIDC_LOCAL_PASSWORDS = "off"
    settings.OIDC_PROVIDER_NAME = "Example Corp"
    settings.OIDC_OP_ISSUER = found["issuer"]
    settings.OIDC_OP_AUTHORIZATION_ENDPOINT = found["authorization_endpoint"]
    settings.OIDC_OP_TOKEN_ENDPOINT = found["token_endpoint"]
    settings.OIDC_OP_USER_ENDPOINT = found["userinfo_endpoint"]
    settings.OIDC_OP_JWKS_ENDPOINT = found["jwks_uri"]
    settings.OIDC_OP_END_SESSION_ENDPOINT = found["end_session_endpoint"]
    settings.OIDC_RP_CLIENT_ID = CLIENT_ID
    settings.OIDC_RP_CLIENT_SECRET = CLIENT_SECRET
    settings.OIDC_ROLE_MAPPING = MAPPING
    # The console's calls to the provider wait as long as a loaded machine needs (the product's 5 s may not).
    settings.OIDC_TIMEOUT = 60.0
    make_workspace(7, "Client onboarding")
    return provider


def _set_groups(provider, *groups: str) -> None:
    provider["users"].write_text(
        json.dumps({"dana": {"email": "dana@example.test", "groups": list(groups)}})
    )


def _sign_in_at_provider(page, live_server) -> None:
    page.goto(f"{live_server.url}/accounts/login/")
    page.get_by_role("link", name="Sign in with Example Corp").click()
    # The provider's own sign-in form (oidc-provider's development interactions).
    page.locator('input[name="login"]').fill("dana")
    page.locator('input[name="password"]').fill("dana's password at the provider")
    page.get_by_role("button", name="Sign-in").click()
    expect(page.locator("header .who")).to_have_text("dana")


def _roles_of_dana() -> set[tuple[int, str]]:
    return set(Membership.objects.filter(user__username="dana").values_list("workspace_id", "role"))


def _sign_out_everywhere(page, live_server) -> None:
    page.get_by_role("button", name="Sign out").click()
    # The provider asks before it ends its session; then it sends the browser back to our sign-in page.
    page.get_by_role("button", name="Yes, sign me out").click()
    expect(page).to_have_url(f"{live_server.url}/accounts/login/")
    expect(page.locator("header .who")).to_have_count(0)


def test_sign_in_maps_groups_to_roles_and_a_removed_group_loses_its_role(page, live_server, sso_on):
    _set_groups(sso_on, APPROVERS, OPERATORS)
    _sign_in_at_provider(page, live_server)
    assert _roles_of_dana() == {(7, Role.APPROVER), (7, Role.OPERATOR)}
    expect(page.locator("aside.workspaces")).to_contain_text("approver")
    grants = RoleChange.objects.filter(user__username="dana", action="grant")
    assert {(g.role, g.changed_by.username) for g in grants} == {
        ("approver", "identity-provider"),
        ("operator", "identity-provider"),
    }

    _sign_out_everywhere(page, live_server)

    _set_groups(sso_on, OPERATORS)
    # The provider's session ended with ours: its sign-in form is asked for again.
    _sign_in_at_provider(page, live_server)
    assert _roles_of_dana() == {(7, Role.OPERATOR)}
    expect(page.locator("aside.workspaces")).not_to_contain_text("approver")
    revoke = RoleChange.objects.get(user__username="dana", action="revoke")
    assert (revoke.workspace_id, revoke.role) == (7, "approver")


def test_with_local_passwords_off_the_password_form_is_refused(
    page, live_server, sso_on, axe_check
):
    page.goto(f"{live_server.url}/accounts/login/")
    axe_check("sign-in page with single sign-on only")
    expect(page.locator('input[name="password"]')).to_have_count(0)
    expect(page.get_by_role("link", name="Sign in with Example Corp")).to_be_visible()
    token = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    answer = page.request.post(
        f"{live_server.url}/accounts/login/",
        form={"csrfmiddlewaretoken": token, "username": "dana", "password": "anything"},
        headers={"Referer": f"{live_server.url}/accounts/login/"},
    )
    assert answer.status == 403
    assert "Password sign-in is switched off" in answer.text()
