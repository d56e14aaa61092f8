"""The ID token check of the single sign-on backend, against tokens really signed with keys of our own.

mozilla-django-oidc checks the signature; `OIDCRoleBackend` adds the audience, the issuer and the lifetime
and turns every refusal into SuspiciousOperation (a failed sign-in, never a server error)."""

import hashlib
import hmac
import time

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from django.core.exceptions import SuspiciousOperation

from approvals.auth.backends import OIDCRoleBackend

ISSUER = "https://idp.example.test/realms/company"
CLIENT_ID = "handoff-console"


def _key():
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _pem(private_key) -> str:
    return (
        private_key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )


@pytest.fixture(scope="module")
def provider_key():
    return _key()


@pytest.fixture
def backend(settings, provider_key):
    settings.OIDC_ENABLED = True
    settings.OIDC_OP_ISSUER = ISSUER
    settings.OIDC_RP_CLIENT_ID = CLIENT_ID
    settings.OIDC_RP_CLIENT_SECRET = "client-secret-for-tests"
    settings.OIDC_RP_SIGN_ALGO = "RS256"
    settings.OIDC_RP_IDP_SIGN_KEY = _pem(provider_key)
    return OIDCRoleBackend()


def _claims(**changes) -> dict:
    now = int(time.time())
    claims = {
        "iss": ISSUER,
        "aud": CLIENT_ID,
        "sub": "dana",
        "iat": now,
        "exp": now + 300,
        "nonce": "nonce-1",
    }
    claims.update(changes)
    return {name: value for name, value in claims.items() if value is not None}


def _sign(claims: dict, key) -> str:
    return jwt.encode(claims, key, algorithm="RS256", headers={"kid": "k1"})


def test_a_token_signed_by_the_provider_for_us_is_accepted(backend, provider_key):
    payload = backend.verify_token(_sign(_claims(), provider_key), nonce="nonce-1")
    assert payload["sub"] == "dana"


def test_a_token_signed_with_another_key_is_refused(backend):
    forged = _sign(_claims(), _key())
    with pytest.raises(SuspiciousOperation, match="Signature verification failed"):
        backend.verify_token(forged, nonce="nonce-1")


def test_an_expired_token_is_refused(backend, provider_key):
    now = int(time.time())
    expired = _sign(_claims(iat=now - 3600, exp=now - 600), provider_key)
    with pytest.raises(SuspiciousOperation, match="expired"):
        backend.verify_token(expired, nonce="nonce-1")


def test_a_token_whose_claims_were_changed_after_signing_is_refused(backend, provider_key):
    header, _, signature = _sign(_claims(), provider_key).split(".")
    other_body = _sign(_claims(sub="root"), provider_key).split(".")[1]
    with pytest.raises(SuspiciousOperation, match="Signature verification failed"):
        backend.verify_token(f"{header}.{other_body}.{signature}", nonce="nonce-1")


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ({"aud": "another-application"}, "Audience"),
        ({"iss": "https://evil.example.test"}, "issuer"),
        ({"exp": None}, "exp"),
    ],
)
def test_a_token_for_another_client_or_issuer_or_without_lifetime_is_refused(
    backend, provider_key, changes, why
):
    with pytest.raises(SuspiciousOperation, match=why):
        backend.verify_token(_sign(_claims(**changes), provider_key), nonce="nonce-1")


def test_a_replayed_token_with_another_sign_ins_nonce_is_refused(backend, provider_key):
    with pytest.raises(SuspiciousOperation, match="Nonce"):
        backend.verify_token(_sign(_claims(), provider_key), nonce="nonce-2")


def test_an_unsigned_token_is_refused(backend):
    unsigned = jwt.encode(_claims(), key=None, algorithm="none")
    with pytest.raises(SuspiciousOperation):
        backend.verify_token(unsigned, nonce="nonce-1")


def test_a_token_signed_with_the_public_key_as_a_shared_secret_is_refused(backend, provider_key):
    """The algorithm confusion attack: HS256 keyed with the provider's public key."""
    header = jwt.utils.base64url_encode(b'{"alg":"HS256","typ":"JWT"}').decode()
    body = jwt.utils.base64url_encode(jwt.api_jws.json.dumps(_claims()).encode()).decode()
    mac = hmac.new(_pem(provider_key).encode(), f"{header}.{body}".encode(), hashlib.sha256)
    token = f"{header}.{body}.{jwt.utils.base64url_encode(mac.digest()).decode()}"
    with pytest.raises(SuspiciousOperation):
        backend.verify_token(token, nonce="nonce-1")


def test_garbage_is_refused_not_a_server_error(backend):
    with pytest.raises(SuspiciousOperation):
        backend.verify_token("not-a-token", nonce="nonce-1")
