"""What OAuth2 client credentials cost a call: the idempotency_key_http kind's one-call delivery with an OAuth2
token (cached), unmapped and through a request mapping, against the same kind, unmapped, with a static bearer
token, in the same run.

    .venv/bin/python bench/oauth2_bench.py [--calls 1500] [--rounds 6] [--json var/bench/oauth2.json]

The token server and the API are the tests' (`tests/outbox/destinations/oauth2_servers.py`), each a process of
its own: the API checks every bearer token's HMAC and expiry, the OAuth2 one and the static one alike (the
static one is minted here with the shared key, valid for the whole run), so both sides pay the same server
work. A run builds the destination, makes one call outside the timing (the OAuth2 side fetches its token
there), then times `--calls` calls of `deliver()`, each a new key: the kind's whole call path (credentials,
request, receipt reading), without the dispatcher and its database, so that the ratio is the credentials'.
The mapped side's requests are rendered from the payload by a mapping (body, a header, a query parameter)
before the timing, as approval renders and freezes them; its calls send those.

Each round is three runs back to back, bearer, OAuth2 and mapped OAuth2, the order rotating from round to
round so that a machine getting busier or quieter favours no side. The figures are the medians of the
rounds' ratios to the unmapped bearer rate, the mapped OAuth2 one against the aim of 0.8 (issue 35); every
round is kept, with the tokens the OAuth2 runs fetched (one each: the cache held) and the machine's load.
"""

import argparse
import hashlib
import hmac
import json
import os
import secrets
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
# Production-like settings (no debug); no database is touched: the calls need none.
for name, value in {
    "DJANGO_SETTINGS_MODULE": "config.settings",
    "DJANGO_SECRET_KEY": secrets.token_urlsafe(40),
    "DJANGO_DEBUG": "0",
    "DJANGO_SECURE": "0",
    "LOG_LEVEL": "WARNING",
}.items():
    os.environ.setdefault(name, value)

import django  # noqa: E402
import httpx  # noqa: E402

django.setup()

from bench import pairs  # noqa: E402
from bench.pairs import CpuGroups  # noqa: E402
from lib.request_mapping import render_request  # noqa: E402
from outbox.destinations.registry import destination_from_config  # noqa: E402
from outbox.failures import Outgoing  # noqa: E402
from outbox.payloads import payload_hash  # noqa: E402

AIM = 0.8
CLIENT_ID, CLIENT_SECRET = "handoff-dispatcher", "oauth2-client-secret-for-tests"
SECRET_ENV, BEARER_ENV = "HANDOFF_DEST_BENCH_OAUTH_SECRET", "HANDOFF_DEST_BENCH_BEARER"
PAYLOAD = {"client_name": "Bench client", "plan": "standard", "seats": 5}
MAPPING = {
    "body": {
        "record": {"name": {"$": "client_name"}, "plan": {"$": "plan"}, "seats": {"$": "seats"}}
    },
    "headers": {"X-Plan": {"$": "plan"}},
    "query": {"source": "handoff"},
}
SIDES = ("bearer", "oauth2", "mapped_oauth2")


def start(role: str, key: str) -> tuple[str, subprocess.Popen]:
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.outbox.destinations.oauth2_servers", role, key, ""],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    line = process.stdout.readline().strip()
    if not line.startswith("listening on "):
        process.kill()
        raise SystemExit(f"the {role} server did not start: {line!r}")
    return line.removeprefix("listening on "), process


def static_token(key: str) -> str:
    text = f"1.{int((time.time() + 86400) * 1000)}"
    return f"{text}.{hmac.new(key.encode(), text.encode(), hashlib.sha256).hexdigest()}"


def config(api: str, auth: dict) -> dict:
    return {
        "kind": "idempotency_key_http",
        "name": "bench",
        "url": api,
        "create": {"path": "/v1/records"},
        "receipt": {"id": "record.id", "key": "record.key"},
        "auth": auth,
    }


def outgoing(key: str, *, mapped: bool) -> Outgoing:
    if not mapped:
        return Outgoing(action_key=key, payload=PAYLOAD, payload_hash=payload_hash(PAYLOAD))
    request = render_request(MAPPING, PAYLOAD, where="request")
    body = request["body"]
    return Outgoing(action_key=key, payload=body, payload_hash=payload_hash(body), request=request)


def run(api: str, auth: dict, calls: int, prefix: str, *, mapped: bool) -> float:
    """Calls per second of `calls` deliveries after one untimed call."""
    destination = destination_from_config(config(api, auth))
    try:
        items = [outgoing(f"{prefix}:{n}", mapped=mapped) for n in range(calls + 1)]
        if not destination.deliver(items[0]).delivered:
            raise SystemExit(f"{prefix}: the first call was not delivered")
        started = time.perf_counter()
        for item in items[1:]:
            result = destination.deliver(item)
            if not result.delivered:
                raise SystemExit(f"{prefix}: {item.action_key} was not delivered: {result.detail}")
        return calls / (time.perf_counter() - started)
    finally:
        destination.close()


def issued(token_url: str) -> int:
    return httpx.get(f"{token_url}/_test/state", timeout=30).json()["issued"]


def one_round(number: int, api: str, token_url: str, sides: dict, calls: int) -> dict:
    order = list(SIDES[number % 3 :] + SIDES[: number % 3])
    rates, before = {}, issued(token_url)
    for side in order:
        mapped = side.startswith("mapped")
        rates[side] = run(api, sides[side], calls, f"round{number}:{side}", mapped=mapped)
    return {
        "order": order,
        **{f"{side}_per_s": round(rates[side], 1) for side in SIDES},
        "ratio": round(rates["oauth2"] / rates["bearer"], 3),
        "mapped_ratio": round(rates["mapped_oauth2"] / rates["bearer"], 3),
        "tokens_fetched": issued(token_url) - before,
    }


def judged_round(number: int, r: dict, ahead: dict, start: dict, end: dict) -> pairs.Pair:
    """A round as bench/pairs.py judges a pair: the bearer run the reference, the mapped OAuth2 run the
    subject (the rotation of three already alternates which goes first)."""
    during = pairs.window(start, end)
    return pairs.Pair(
        index=number,
        first=r["order"][0],
        reference=r["bearer_per_s"],
        subject=r["mapped_oauth2_per_s"],
        ratio=r["mapped_ratio"],
        before=pairs.window(ahead, start),
        during=during,
        loaded=during.others_share > pairs.MAX_OTHERS_SHARE,
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=1500)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    key = secrets.token_hex(16)
    os.environ[SECRET_ENV] = CLIENT_SECRET
    os.environ[BEARER_ENV] = static_token(key)
    token_url, token_process = start("token", key)
    api, api_process = start("api", key)
    oauth2 = {
        "scheme": "oauth2_client_credentials",
        "token_url": f"{token_url}/token",
        "client_id": CLIENT_ID,
        "client_secret_env": SECRET_ENV,
    }
    sides = {
        "bearer": {"scheme": "bearer", "token_env": BEARER_ENV},
        "oauth2": oauth2,
        "mapped_oauth2": oauth2,
    }
    load_before = os.getloadavg()
    rounds, judged, groups = [], [], CpuGroups()
    try:
        for number in range(max(args.rounds, pairs.MIN_PAIRS)):
            ahead = groups.snapshot()
            time.sleep(pairs.BEFORE_SECONDS)
            began = groups.snapshot()
            rounds.append(one_round(number, api, token_url, sides, args.calls))
            judged.append(judged_round(number, rounds[-1], ahead, began, groups.snapshot()))
            print(json.dumps(rounds[-1]), flush=True)
            pairs.print_pair(judged[-1])
    finally:
        for process in (api_process, token_process):
            process.kill()
            process.wait(timeout=10)
    figure = pairs.judge(
        pairs.PairedFigure(
            name="oauth2_bearer",
            pairs=judged,
            max_others_share=pairs.MAX_OTHERS_SHARE,
            collapse_fraction=pairs.COLLAPSE_FRACTION,
            idle_reference=pairs.idle_reference("oauth2_bearer"),
        )
    )
    pairs.record_idle_reference(figure)
    ratio = statistics.median(r["ratio"] for r in rounds)
    mapped = figure.ratio
    result = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "calls_per_run": args.calls,
        "rounds": rounds,
        "ratio_median": round(ratio, 3),
        "mapped_ratio_median": mapped,
        "describe": figure.describe(),
        "judged": figure.as_json(),
        "aim": AIM,
        "met": mapped is not None and mapped >= AIM,
        "cpus": os.cpu_count(),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
    }
    print(
        f"medians of {len(rounds)} rounds: OAuth2 / bearer {ratio:.3f}, mapped OAuth2 / unmapped bearer "
        f"{figure.describe()} (aim >= {AIM}: {'met' if result['met'] else 'missed'}); "
        f"load {result['load_average_before']} -> {result['load_average_after']}"
    )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
