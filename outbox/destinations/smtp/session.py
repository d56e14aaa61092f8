"""One SMTP session of the smtp kind, and what it means for the handoff it carried.

Django's SMTP backend raises the same exceptions whether a session failed before or after the message data
went out; which one it was is the whole difference between "nothing was sent" and "the server may hold
it". `Transcript` records it: the connection class (`TrackedSMTP`, a subclass of smtplib's, which is what
Django's backend uses underneath) notes every command sent and every reply read, and the moment the message
itself begins to be written, which is the first write after the server answered 354 to DATA.
`smtp_result` reads the transcript and the exception:
- nothing written yet (connect refused, TLS refused, a 4xx/5xx to EHLO, AUTH, MAIL FROM, RCPT TO or DATA):
  nothing was sent; transient (connect, 4xx), permanent (5xx), credential (530/534/535/538);
- written, and the server answered it: 2xx delivered, 4xx transient, 5xx permanent (RFC 5321 4.2.5 and
  6.1: a server that answers a failure to the data has not taken responsibility for the message);
- written, and no answer (timeout, connection dropped, an unreadable reply): uncertain, the server may
  hold the message.
"""

import smtplib
import ssl
import time
from dataclasses import dataclass
from functools import partial

from django.core.mail.backends.smtp import EmailBackend
from django.utils.functional import cached_property

from outbox.failures import DeliveryResult, Outgoing
from outbox.models import FailureClass
from outbox.redaction import redact_text

# Answers that refuse our credentials or ask for ones we did not give: the destination's problem.
CREDENTIAL_CODES = frozenset({530, 534, 535, 538})


@dataclass
class Transcript:
    """How far one SMTP session got: the last command and reply, whether the message itself began to be
    written (after a 354 to DATA), and the reply to it. Filled by `TrackedSMTP` as the session goes on."""

    deadline: float  # monotonic: the whole session ends by then
    command: str = ""
    reply: tuple[int, str] | None = None
    data_sent: bool = False
    answer: tuple[int, str] | None = None

    def sending(self) -> None:
        if self.command == "data" and self.reply is not None and self.reply[0] == 354:
            self.data_sent = True

    def replied(self, code: int, text: bytes) -> None:
        self.reply = (code, text.decode("utf-8", "replace")[:300])
        if self.data_sent and self.answer is None:
            self.answer = self.reply

    def remaining(self) -> float:
        return max(self.deadline - time.monotonic(), 0.01)

    def last_reply(self) -> str:
        return f"{self.reply[0]} {self.reply[1]}" if self.reply else "none (no greeting)"


class _Tracking:
    """Records the session in its `Transcript` and bounds every read and write by the session's deadline."""

    transcript: Transcript

    def _bound(self) -> None:
        if self.sock is not None:
            self.sock.settimeout(self.transcript.remaining())

    def putcmd(self, cmd, args=""):
        self.transcript.command = cmd.lower()
        super().putcmd(cmd, args)

    def send(self, s):
        self._bound()
        self.transcript.sending()
        super().send(s)

    def getreply(self):
        self._bound()
        code, text = super().getreply()
        self.transcript.replied(code, text)
        return code, text


class TrackedSMTP(_Tracking, smtplib.SMTP):
    def __init__(self, transcript: Transcript, *args, **kwargs):
        self.transcript = transcript
        super().__init__(*args, **kwargs)


class TrackedSMTPSSL(_Tracking, smtplib.SMTP_SSL):
    def __init__(self, transcript: Transcript, *args, **kwargs):
        self.transcript = transcript
        super().__init__(*args, **kwargs)


class TrackingEmailBackend(EmailBackend):
    """Django's SMTP backend whose connections record their session in `transcript`; `ca_file` names the
    certificates a private server's is checked against (the system's otherwise)."""

    def __init__(self, *, transcript: Transcript, ca_file: str = "", **kwargs):
        super().__init__(**kwargs)
        self.transcript, self.ca_file = transcript, ca_file

    @property
    def connection_class(self):
        return partial(TrackedSMTPSSL if self.use_ssl else TrackedSMTP, self.transcript)

    @cached_property
    def ssl_context(self):
        return ssl.create_default_context(cafile=self.ca_file or None)


def _answered(code: int, text: str, *, step: str, permanent_reason: str) -> DeliveryResult:
    """An answer to a command before the message was written: nothing was sent."""
    detail = redact_text(f"{step} answered {code} {text}")
    status = code if 200 <= code <= 599 else None
    if code in CREDENTIAL_CODES:
        return DeliveryResult.failed(
            FailureClass.CREDENTIAL, "credential_rejected", detail, status_code=status
        )
    if 500 <= code <= 599:
        return DeliveryResult.failed(
            FailureClass.PERMANENT, permanent_reason, detail, status_code=status
        )
    return DeliveryResult.failed(FailureClass.TRANSIENT, f"smtp_{code}", detail, status_code=status)


# The step each refusal of smtplib's comes from, and the reason a permanent (5xx) one is recorded with.
_REFUSALS = (
    (smtplib.SMTPAuthenticationError, "AUTH", "credential_rejected"),
    (smtplib.SMTPSenderRefused, "MAIL FROM", "sender_refused"),
    (smtplib.SMTPDataError, "DATA", "data_refused"),
    (smtplib.SMTPHeloError, "EHLO", "helo_refused"),
    (smtplib.SMTPResponseException, "the server", "smtp_refused"),
)


def _text(value: object) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _refusal(exc: Exception) -> DeliveryResult | None:
    """The server's answer refusing a command before the data, or None when `exc` carries no answer."""
    if isinstance(exc, smtplib.SMTPRecipientsRefused):
        code, text = next(iter(exc.recipients.values()))
        return _answered(code, _text(text), step="RCPT TO", permanent_reason="recipient_refused")
    for kind, step, reason in _REFUSALS:
        if isinstance(exc, kind):
            return _answered(
                exc.smtp_code, _text(exc.smtp_error), step=step, permanent_reason=reason
            )
    return None


def _before_data(exc: Exception, transcript: Transcript) -> DeliveryResult:
    """A session that failed before the message was written: nothing was sent, safe to try again."""
    if isinstance(exc, smtplib.SMTPConnectError):
        # Not greeted with 220 (a 421 or 554 at connect): the server takes no mail now. (A subclass of
        # SMTPResponseException: before the refusals.)
        return DeliveryResult.failed(
            FailureClass.TRANSIENT, "connect_failed", redact_text(f"greeting: {exc}")
        )
    refusal = _refusal(exc)
    if refusal is not None:
        return refusal
    if isinstance(exc, smtplib.SMTPNotSupportedError):
        # STARTTLS or AUTH not offered: the destination is not as configured, nothing goes until it is.
        return DeliveryResult.failed(
            FailureClass.CREDENTIAL, "security_unavailable", redact_text(str(exc))
        )
    return _unanswered(exc, transcript)


def _unanswered(exc: Exception, transcript: Transcript) -> DeliveryResult:
    """A session that broke off before the data without a refusal: a connect, TLS or the line failed."""
    if isinstance(exc, TimeoutError) and transcript.reply is None:
        return DeliveryResult.failed(
            FailureClass.TRANSIENT, "connect_timeout", redact_text(str(exc))
        )
    if transcript.reply is None or isinstance(exc, ssl.SSLError):
        # Refused, unreachable, never greeted, or TLS refused (an untrusted certificate is an SSLError and a
        # ValueError: first) before anything was written. Counted by the breaker as a failed connect.
        return DeliveryResult.failed(
            FailureClass.TRANSIENT, "connect_failed", redact_text(f"{type(exc).__name__}: {exc}")
        )
    if isinstance(exc, ValueError):
        # What smtplib cannot write (an address it cannot encode): the message, not the server, is wrong.
        return DeliveryResult.failed(
            FailureClass.PERMANENT, "message_invalid", redact_text(str(exc))
        )
    return DeliveryResult.failed(
        FailureClass.TRANSIENT,
        "connection_lost_before_data",
        redact_text(f"{type(exc).__name__} after {transcript.last_reply()}: {exc}"),
    )


def _after_data(
    exc: Exception | None, transcript: Transcript, message_id: str, outgoing: Outgoing, where: str
) -> DeliveryResult:
    """A session in which the message was written: the server's answer to it decides, and without one
    nobody knows whether the server kept it."""
    if transcript.answer is not None and 200 <= transcript.answer[0] <= 299:
        code, text = transcript.answer
        receipt = {
            "message_id": message_id,
            "action_key": outgoing.action_key,
            "payload_hash": outgoing.payload_hash,
            "reply": f"{code} {text}"[:300],
        }
        return DeliveryResult.ok(
            task_id=message_id, created=True, status_code=code, receipt=receipt
        )
    if transcript.answer is not None and 400 <= transcript.answer[0] <= 599:
        code, text = transcript.answer
        return _answered(code, text, step="the message data", permanent_reason="message_refused")
    local, _, domain = message_id.strip("<>").partition("@")
    cause = f"{type(exc).__name__}: {exc}" if exc is not None else "an unreadable reply"
    return DeliveryResult.failed(
        FailureClass.UNCERTAIN,
        "answer_lost_after_data",
        # The Message-ID in two parts: whole, it reads as an address and redaction would hide it.
        f"the message was written to {where} and no answer to it came ({cause}); last reply: "
        f"{transcript.last_reply()}. The mailbox may hold it: Message-ID {local} at {domain}, "
        f"header X-Handoff-Action-Key: {outgoing.action_key}",
    )


def smtp_result(
    exc: Exception | None, transcript: Transcript, message_id: str, outgoing: Outgoing, where: str
) -> DeliveryResult:
    """What one session means for its handoff: `exc` is what sending raised (None: nothing)."""
    if transcript.data_sent:
        return _after_data(exc, transcript, message_id, outgoing, where)
    if exc is None:
        # Django returned without sending and without an error: nothing went out.
        return DeliveryResult.failed(FailureClass.PERMANENT, "not_sent", "no recipient to send to")
    return _before_data(exc, transcript)
