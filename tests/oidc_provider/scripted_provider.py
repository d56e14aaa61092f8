"""An OpenID Connect provider whose answers a test scripts, in a process of its own, for hostile sign-ons.

The code flow as OpenID Connect Core 1.0 and RFC 7636 describe it: discovery, the authorization endpoint
(redirects straight back with a code: the person is whoever the script names), the token endpoint
(client_secret_post, PKCE S256, the code used once, an RS256 ID token with the nonce), JWKS and userinfo.
What a real provider would never do is the script's to choose: the claims of the ID token and, apart,
those of the userinfo answer (another `sub`, a look-alike `preferred_username`).

python scripted_provider.py SCRIPT CLIENT_ID CLIENT_SECRET: the port comes from the kernel (bind to 0) and
is printed as `listening on http://127.0.0.1:PORT`. SCRIPT is a JSON file read at each authorization:
    {"id_token": {"sub": "s-1", "preferred_username": "dana", "groups": []},
     "userinfo": {"sub": "s-1", ...}}     # optional; default: the ID token's claims
"""

import base64
import hashlib
import json
import secrets
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlencode, urlparse

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
KID = "scripted-1"
CODES: dict[str, dict] = {}
TOKENS: dict[str, dict] = {}
STATS = {"token_requests": 0}


def _s256(verifier: str) -> str:
    digest = hashlib.sha256(verifier.encode()).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


class Provider(BaseHTTPRequestHandler):
    script_path = ""
    client_id = ""
    client_secret = ""
    issuer = ""

    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        sys.stderr.write("provider: " + format % args + "\n")

    def _json(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):  # noqa: N802 - http.server's name
        url = urlparse(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        if url.path == "/.well-known/openid-configuration":
            return self._json(200, self._discovery())
        if url.path == "/jwks":
            jwk = json.loads(RSAAlgorithm.to_jwk(KEY.public_key()))
            return self._json(200, {"keys": [{**jwk, "kid": KID, "use": "sig", "alg": "RS256"}]})
        if url.path == "/stats":  # the tests' own window: how many code exchanges were asked for
            return self._json(200, STATS)
        if url.path == "/authorize":
            return self._authorize(query)
        if url.path == "/userinfo":
            token = self.headers.get("Authorization", "").removeprefix("Bearer ")
            if token not in TOKENS:
                return self._json(401, {"error": "invalid_token"})
            return self._json(200, TOKENS[token])
        return self._json(404, {"error": "not_found"})

    def do_POST(self):  # noqa: N802
        length = int(self.headers.get("Content-Length", "0"))
        form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
        if urlparse(self.path).path != "/token":
            return self._json(404, {"error": "not_found"})
        return self._token(form)

    def _discovery(self) -> dict:
        return {
            "issuer": self.issuer,
            "authorization_endpoint": f"{self.issuer}/authorize",
            "token_endpoint": f"{self.issuer}/token",
            "userinfo_endpoint": f"{self.issuer}/userinfo",
            "jwks_uri": f"{self.issuer}/jwks",
            "response_types_supported": ["code"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["RS256"],
            "code_challenge_methods_supported": ["S256"],
        }

    def _authorize(self, query: dict) -> None:
        if query.get("client_id") != self.client_id or query.get("response_type") != "code":
            return self._json(400, {"error": "invalid_request"})
        if query.get("code_challenge_method") != "S256" or not query.get("code_challenge"):
            return self._json(400, {"error": "invalid_request", "error_description": "PKCE S256"})
        with open(self.script_path, encoding="utf-8") as f:
            script = json.load(f)
        code = secrets.token_urlsafe(24)
        CODES[code] = {
            "script": script,
            "nonce": query.get("nonce"),
            "challenge": query["code_challenge"],
            "redirect_uri": query.get("redirect_uri"),
        }
        target = f"{query.get('redirect_uri')}?{urlencode({'code': code, 'state': query.get('state', '')})}"
        self.send_response(302)
        self.send_header("Location", target)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _token(self, form: dict) -> None:
        STATS["token_requests"] += 1
        grant = CODES.pop(form.get("code", ""), None)
        if (
            grant is None
            or form.get("client_id") != self.client_id
            or form.get("client_secret") != self.client_secret
            or form.get("redirect_uri") != grant["redirect_uri"]
            or _s256(form.get("code_verifier", "")) != grant["challenge"]
        ):
            return self._json(400, {"error": "invalid_grant"})
        now = int(time.time())
        claims = dict(grant["script"]["id_token"])
        id_token = jwt.encode(
            {
                **claims,
                "iss": self.issuer,
                "aud": self.client_id,
                "iat": now,
                "exp": now + 300,
                "nonce": grant["nonce"],
            },
            KEY,
            algorithm="RS256",
            headers={"kid": KID},
        )
        access_token = secrets.token_urlsafe(24)
        TOKENS[access_token] = grant["script"].get("userinfo", claims)
        return self._json(
            200,
            {
                "access_token": access_token,
                "token_type": "Bearer",
                "expires_in": 300,
                "id_token": id_token,
            },
        )


def main() -> None:
    script, client_id, client_secret = sys.argv[1:4]
    server = ThreadingHTTPServer(("127.0.0.1", 0), Provider)
    Provider.script_path = script
    Provider.client_id = client_id
    Provider.client_secret = client_secret
    Provider.issuer = f"http://127.0.0.1:{server.server_port}"
    print(f"listening on {Provider.issuer}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
