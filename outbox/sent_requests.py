"""What a handoff sends its destination, in the words of the destination's kind, for the handoff's page:
the call (method and path), the body as sent (redacted as payloads are), the headers the route mapped
(redacted) and the names only of those the destination sets itself (credentials, the idempotency key);
for e-mail the recipient, subject and text. Built from the request frozen in the handoff at approval
(`Handoff.request`), never rendered again; a route that maps nothing sends the payload as it is.
"""

from dataclasses import dataclass, field

from outbox.destinations.base import Destination
from outbox.destinations.http.destination import HttpDestination
from outbox.destinations.http.mapped_request import MappedParts
from outbox.destinations.idempotency_key.destination import IdempotencyKeyHttpDestination
from outbox.destinations.idempotency_key.placement import KeyNotPlaced
from outbox.destinations.smtp.destination import SmtpDestination, Unsendable
from outbox.failures import Outgoing
from outbox.models import Handoff
from outbox.redaction import redact

# The http kind signs each call in the Standard Webhooks format (outbox/signing.py).
SIGNATURE_HEADERS = ("webhook-id", "webhook-timestamp", "webhook-signature")


@dataclass(frozen=True)
class SentRequest:
    # True: rendered at approval and frozen in the handoff; False: the payload as it is.
    frozen: bool
    # "POST /v1/accounts/Acme", or for e-mail "e-mail from welcome@…" ("" where the kind says none).
    call: str = ""
    body: object = None
    # The route's own headers, redacted; the names of those the destination sets itself.
    headers: dict = field(default_factory=dict)
    destination_headers: list[str] = field(default_factory=list)
    # E-mail: {"to", "subject", "text"}, the address redacted.
    email: dict | None = None
    problem: str = ""


def sent_request(handoff: Handoff, destination: Destination | None) -> SentRequest:
    """What `handoff` sends to `destination` (its own, as built; None when none serves it), as far as the
    destination's kind can say without calling it."""
    outgoing = Outgoing(
        action_key=handoff.action_key,
        payload=handoff.sent_body,
        payload_hash=handoff.payload_hash,
        request=handoff.request,
    )
    frozen = handoff.request is not None
    if isinstance(destination, IdempotencyKeyHttpDestination):
        return _http_request(destination, outgoing, frozen)
    if isinstance(destination, SmtpDestination):
        return _email(destination, outgoing, frozen)
    if isinstance(destination, HttpDestination):
        return SentRequest(
            frozen=frozen,
            call="POST /tasks",
            body=redact(outgoing.payload),
            destination_headers=[*SIGNATURE_HEADERS, "Content-Type", "Idempotency-Key"],
        )
    return SentRequest(frozen=frozen, body=redact(outgoing.payload))


def _http_request(
    destination: IdempotencyKeyHttpDestination, outgoing: Outgoing, frozen: bool
) -> SentRequest:
    config = destination.config
    create, key = config.create, config.key
    try:
        mapped = MappedParts.of(outgoing.request)
    except ValueError as exc:
        return SentRequest(frozen=frozen, body=redact(outgoing.payload), problem=str(exc))
    hashed = {create.payload_hash_property: outgoing.payload_hash}
    try:
        body = key.body(
            outgoing.payload, outgoing.action_key, hashed if create.payload_hash_property else {}
        )
    except KeyNotPlaced as exc:
        return SentRequest(frozen=frozen, body=redact(outgoing.payload), problem=str(exc))
    own = [
        *([config.credentials.header] if config.credentials.scheme != "none" else []),
        "Content-Type",
        *key.headers(outgoing.action_key),
        *([create.payload_hash_header] if create.payload_hash_header else []),
        *config.headers,
    ]
    return SentRequest(
        frozen=frozen,
        call=f"{create.method} {key.path(mapped.path(create.path), outgoing.action_key)}",
        body=redact(body),
        headers=redact(mapped.headers),
        destination_headers=own,
    )


def _email(destination: SmtpDestination, outgoing: Outgoing, frozen: bool) -> SentRequest:
    try:
        subject, text, to = destination.email_parts(outgoing)
    except Unsendable as exc:
        return SentRequest(frozen=frozen, call=destination.describe(), problem=str(exc))
    return SentRequest(
        frozen=frozen,
        call=f"e-mail from {destination.from_address}",
        email=redact({"to": to, "subject": subject, "text": text}),
        destination_headers=["From", "Message-ID", "X-Handoff-Action-Key"],
    )
