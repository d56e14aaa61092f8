"""An OpenID Connect provider's token and userinfo endpoints on 127.0.0.1, in a thread of its own.

It answers a code it issued with an ID token really signed by its own RSA key (once: codes are single
use) and any other code with 400 invalid_grant, as a provider does. `sso_settings` configures the console
against it; `sign_in_through_provider` walks a browser's round trip through the console's real views."""

import json
import secrets
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from django.test import Client

CLIENT_ID = "handoff-console"
CALLBACK = "/accounts/oidc/callback/"


class TokenProvider:
    def __init__(self):
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.codes: dict[str, dict] = {}
        self.tokens: dict[str, dict] = {}
        self.token_requests = 0
        self._lock = threading.Lock()
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - the name http.server calls
                length = int(self.headers.get("Content-Length", "0"))
                form = parse_qs(self.rfile.read(length).decode())
                code = form.get("code", [""])[0]
                with provider._lock:
                    provider.token_requests += 1
                    claims = provider.codes.pop(code, None)
                if claims is None:
                    self._answer(400, {"error": "invalid_grant"})
                    return
                access_token = secrets.token_urlsafe(16)
                with provider._lock:
                    provider.tokens[access_token] = claims
                id_token = jwt.encode(claims, provider.key, algorithm="RS256")
                self._answer(200, {"id_token": id_token, "access_token": access_token})

            def do_GET(self):  # noqa: N802 - the name http.server calls
                token = self.headers.get("Authorization", "").removeprefix("Bearer ")
                with provider._lock:
                    claims = provider.tokens.get(token)
                self._answer(401, {}) if claims is None else self._answer(200, claims)

            def _answer(self, status: int, document: dict) -> None:
                body = json.dumps(document).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def issuer(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> "TokenProvider":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)

    def public_pem(self) -> str:
        public = self.key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        return public.decode()

    def issue_code(self, *, username: str, nonce: str) -> str:
        """The code the provider sends back after `username` signed in there for this nonce."""
        now = int(time.time())
        code = secrets.token_urlsafe(16)
        with self._lock:
            self.codes[code] = {
                "iss": self.issuer,
                "aud": CLIENT_ID,
                "sub": f"subject-{username}",
                "preferred_username": username,
                "email": f"{username}@example.test",
                "groups": [],
                "iat": now,
                "exp": now + 300,
                "nonce": nonce,
            }
        return code


def sso_settings(settings, provider: TokenProvider) -> None:
    settings.OIDC_ENABLED = True
    settings.OIDC_LOCAL_PASSWORDS = "break_glass"
    settings.OIDC_OP_ISSUER = provider.issuer
    settings.OIDC_OP_AUTHORIZATION_ENDPOINT = f"{provider.issuer}/authorize"
    settings.OIDC_OP_TOKEN_ENDPOINT = f"{provider.issuer}/token"
    settings.OIDC_OP_USER_ENDPOINT = f"{provider.issuer}/userinfo"
    settings.OIDC_OP_JWKS_ENDPOINT = f"{provider.issuer}/jwks"
    settings.OIDC_RP_CLIENT_ID = CLIENT_ID
    settings.OIDC_RP_CLIENT_SECRET = "client-secret-for-tests"
    settings.OIDC_RP_SIGN_ALGO = "RS256"
    settings.OIDC_RP_IDP_SIGN_KEY = provider.public_pem()
    settings.OIDC_ROLE_MAPPING = {}


def start_sign_in(client: Client) -> dict[str, str]:
    """The console's first leg: the state and nonce it sent the browser to the provider with."""
    answer = client.get("/accounts/oidc/authenticate/")
    assert answer.status_code == 302, answer
    query = parse_qs(urlsplit(answer["Location"]).query)
    return {"state": query["state"][0], "nonce": query["nonce"][0]}


def sign_in_through_provider(client: Client, provider: TokenProvider, username: str):
    """A person's whole round trip: sent to the provider, signed in there, back with a fresh code."""
    flow = start_sign_in(client)
    code = provider.issue_code(username=username, nonce=flow["nonce"])
    return client.get(CALLBACK, {"code": code, "state": flow["state"]})


def bogus_callback(client: Client):
    """A callback with a state of the client's own session and a code the provider never issued."""
    flow = start_sign_in(client)
    return client.get(CALLBACK, {"code": "made-up-code", "state": flow["state"]})
