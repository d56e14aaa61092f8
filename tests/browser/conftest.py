"""Browser tests: pytest-playwright drives Debian's Chromium against pytest-django's live_server."""

import base64
import os
from pathlib import Path

import pytest
from django_otp.oath import TOTP

from tests.processes import loaded_deadline

# Playwright's sync API runs an event loop in the test thread; the ORM calls of the test are still
# plain synchronous code.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


@pytest.fixture(scope="session")
def browser_type_launch_args():
    return {
        "executable_path": "/usr/bin/chromium",
        "args": [
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--disable-quic",
        ],
    }


# Playwright's own wait for an expectation (5 s) is a deadline for the live server's work and Chromium's: a
# fresh clone's `make test` at a load of 35 on 2 cores took longer than that to answer an incident's Acknowledge.
EXPECT_SECONDS = 5.0


@pytest.fixture(autouse=True)
def expectations_wait_for_a_loaded_machine():
    """Every expectation of the test waits `EXPECT_SECONDS`, stretched by the load per core when it starts
    (tests/processes.py `loaded_deadline`): on an idle machine, Playwright's own 5 s."""
    from playwright.sync_api import expect

    expect.set_options(timeout=loaded_deadline(EXPECT_SECONDS) * 1000)
    yield
    expect.set_options(timeout=EXPECT_SECONDS * 1000)


@pytest.fixture
def screenshot(page):
    """Save the page's end state as a test artifact (test-artifacts/ is git-ignored)."""
    ARTIFACTS.mkdir(exist_ok=True)

    def save(name: str) -> Path:
        path = ARTIFACTS / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        assert path.stat().st_size > 0
        return path

    return save


def give_second_factor(page) -> None:
    """Staff owe a second factor after their password (docs/security.md "Second factor"): enrol an
    authenticator from the key the page shows once, and give its code, as a person with an app would."""
    if "/accounts/second-factor/" not in page.url:
        return
    page.locator("#totp-start").click()
    secret = page.locator("#totp-secret").inner_text()
    key = base64.b32decode(secret + "=" * (-len(secret) % 8))
    page.get_by_label("The code it shows now").fill(f"{TOTP(key).token():06d}")
    page.get_by_role("button", name="Confirm").click()


@pytest.fixture
def sign_in(page, live_server):
    def go(username: str) -> None:
        page.goto(f"{live_server.url}/accounts/login/")
        page.get_by_label("User name").fill(username)
        page.get_by_label("Password").fill(f"pw-{username}")
        page.get_by_role("button", name="Sign in").click()
        from playwright.sync_api import expect

        expect(page.locator("header .who")).to_have_text(username)
        give_second_factor(page)

    return go


# The README's pictures: a test run writes them with the other artifacts (git-ignored), so that `make test`
# leaves the checkout clean; `make screenshots` runs the browser tests with this pointed at docs/screenshots.
DOCS_SCREENSHOTS = Path(os.environ.get("SCREENSHOT_DIR") or ARTIFACTS / "screenshots")


@pytest.fixture
def docs_screenshot(page):
    """Save what the screen shows now as the README's picture of it."""
    DOCS_SCREENSHOTS.mkdir(parents=True, exist_ok=True)

    def save(name: str) -> Path:
        path = DOCS_SCREENSHOTS / f"{name}.png"
        page.screenshot(path=str(path), full_page=False)
        assert path.stat().st_size > 0
        return path

    return save


@pytest.fixture
def axe_check(page):
    """Run axe-core on the page as it is now; fail on any serious or critical violation, naming each."""
    from axe_playwright_python.sync_playwright import Axe

    axe = Axe()

    def check(screen: str) -> None:
        violations = axe.run(page).response["violations"]
        bad = [v for v in violations if v.get("impact") in ("serious", "critical")]
        assert not bad, f"{screen} ({page.url}): " + "; ".join(
            f"{v['id']} ({v['impact']}): {v['help']} at {[n['target'] for n in v['nodes']][:3]}"
            for v in bad
        )

    return check


@pytest.fixture
def no_horizontal_scroll(page):
    def check(screen: str) -> None:
        widths = page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
        assert widths[0] <= widths[1], (
            f"{screen} is {widths[0]} px wide in a {widths[1]} px viewport"
        )

    return check
