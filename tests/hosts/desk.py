"""People at their desks, on a host of their own (tests/hosts/web_host.py): a requester submits onboarding
requests through the web app's form and an approver approves each through the request's page, over HTTP as
a browser would (the CSRF token and the hidden fields of each form, the sessions' cookies), one request after
another until STOP_FILE exists.

Run inside the desk host's namespace: `python -m tests.hosts.desk BASE_URL REQUESTER_SESSION
APPROVER_SESSION OUT_FILE STOP_FILE PAUSE_SECONDS`. Each approved request's number is appended to OUT_FILE
once the approval's answer arrived; a failed step (the web app or its database down, a lost answer) is
retried later with a new request, so OUT_FILE names only approvals known to have been made (the test reads
the approved requests from the database as well: an approval whose answer was lost counts there).
"""

import re
import sys
import time
from pathlib import Path

import httpx

HIDDEN = re.compile(r'<input type="hidden" name="([^"]+)" value="([^"]*)"')
CSRF = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')
DETAIL = re.compile(r"/approvals/(\d+)/(\d+)/(\d+)/$")
COOKIE = "sessionid"


def _client(base: str, session: str) -> httpx.Client:
    return httpx.Client(base_url=base, cookies={COOKIE: session}, timeout=20, trust_env=False)


def _form_post(client: httpx.Client, page_url: str, form_action: str, data: dict) -> httpx.Response:
    page = client.get(page_url)
    page.raise_for_status()
    token = CSRF.search(page.text)
    if token is None:
        raise RuntimeError(f"no form at {page_url}")
    hidden = dict(HIDDEN.findall(page.text.split(f'action="{form_action}"', 1)[-1]))
    hidden.pop("decision", None)
    return client.post(
        form_action,
        data={**hidden, **data, "csrfmiddlewaretoken": token.group(1)},
        headers={"Referer": f"{client.base_url}{page_url}"},
    )


def submit(requester: httpx.Client, n: int) -> str:
    """A new request of workspace 7 through the form; the URL of its page."""
    answer = _form_post(
        requester,
        "/approvals/new/",
        "/approvals/new/",
        {
            "workspace": "7",
            "client_name": f"Desk client {n}",
            "contact_email": f"desk{n}@client.example",
            "plan": "standard",
        },
    )
    if answer.status_code != 302 or not DETAIL.search(answer.headers.get("location", "")):
        raise RuntimeError(f"submit answered {answer.status_code}")
    return answer.headers["location"]


def approve(approver: httpx.Client, page_url: str) -> int:
    answer = _form_post(approver, page_url, f"{page_url}decide", {"decision": "approve"})
    if answer.status_code != 302:
        raise RuntimeError(f"approve answered {answer.status_code}")
    return int(DETAIL.search(page_url).group(2))


def main(base: str, requester_session: str, approver_session: str, out: str, stop: str, pause: str):
    requester, approver = _client(base, requester_session), _client(base, approver_session)
    out_path, stop_path, made = Path(out), Path(stop), 0
    while not stop_path.exists():
        made += 1
        try:
            number = approve(approver, submit(requester, made))
        except (httpx.HTTPError, RuntimeError) as exc:
            print(f"request {made}: {exc}; trying again with a new one", flush=True)
            time.sleep(1)
            continue
        with out_path.open("a") as log:
            log.write(f"{number}\n")
        time.sleep(float(pause))


if __name__ == "__main__":
    main(*sys.argv[1:7])
