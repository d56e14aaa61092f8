"""The bundled accounts service's rules, on the IETF Idempotency-Key draft: one account per key.

- a new key creates the account (recorded as processing first, done after its work);
- the same key with the same body answers the original account again, marked as a replay;
- the same key with another body is refused (422) and changes nothing;
- the same key while the first request is still processing is refused as in progress (409): the
  sender retries later with the same key;
- an account is read by its id (GET), with its status: "pending" while it is set up, "active" after;
- an account is closed by its id (DELETE): removed, its answer the account as it was; an id it does not
  hold (never created, or closed already) is not found (404), which a sender's undo counts as done.
"""

import uuid
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from delivery.models import Account, AccountRequestState
from delivery.services import MAX_KEY_LENGTH, payload_hash

DB = "delivery"
PENDING, ACTIVE = "pending", "active"


class KeyMissing(Exception):
    """No Idempotency-Key, or one the service cannot store (400)."""


class KeyInProgress(Exception):
    """A request with this key is still being processed (409)."""


class KeyReused(Exception):
    """This key was used with another request body (422)."""


@dataclass(frozen=True)
class AccountAnswer:
    account: Account
    created: bool


def _checked_key(key: str | None) -> str:
    if not key or not key.strip():
        raise KeyMissing("the Idempotency-Key header is required")
    if len(key) > MAX_KEY_LENGTH:
        raise KeyMissing(f"the Idempotency-Key may be at most {MAX_KEY_LENGTH} characters")
    return key


def _replay(existing: Account, fingerprint: str) -> AccountAnswer:
    if existing.fingerprint != fingerprint:
        raise KeyReused("this Idempotency-Key was used with another request body")
    if existing.state == AccountRequestState.PROCESSING:
        raise KeyInProgress("a request with this Idempotency-Key is still being processed")
    return AccountAnswer(account=existing, created=False)


def account_create_idempotent(*, key: str | None, payload: dict) -> AccountAnswer:
    """The account for `key`: created now, or the one an earlier request with the same body created."""
    key = _checked_key(key)
    fingerprint = payload_hash(payload)
    existing = Account.objects.using(DB).filter(idempotency_key=key).first()
    if existing is not None:
        return _replay(existing, fingerprint)
    try:
        with transaction.atomic(using=DB):
            account = Account.objects.using(DB).create(
                account_id=f"acc_{uuid.uuid4().hex[:24]}",
                idempotency_key=key,
                payload=payload,
                fingerprint=fingerprint,
            )
    except IntegrityError:
        # A concurrent request with the same key inserted first.
        return _replay(Account.objects.using(DB).get(idempotency_key=key), fingerprint)
    # The account's work (provisioning) would happen here; then the request is done.
    Account.objects.using(DB).filter(pk=account.pk).update(state=AccountRequestState.DONE)
    account.state = AccountRequestState.DONE
    return AccountAnswer(account=account, created=True)


def account_close(*, account_id: str) -> Account | None:
    """Remove the account `account_id`; the account as it was, None when there is none (already closed)."""
    with transaction.atomic(using=DB):
        account = (
            Account.objects.using(DB).select_for_update().filter(account_id=account_id).first()
        )
        if account is not None:
            Account.objects.using(DB).filter(pk=account.pk).delete()
    return account


def account_for_key(key: str) -> Account | None:
    return Account.objects.using(DB).filter(idempotency_key=key).first()


def account_by_id(account_id: str) -> Account | None:
    return Account.objects.using(DB).filter(account_id=account_id).first()


def account_status(account: Account) -> str:
    """The account's own status, what its owners' work on it has reached: "pending" while it is being set up
    (ACCOUNTS_ACTIVATION_SECONDS after its creation), "active" after."""
    ready_at = account.created_at + timedelta(seconds=settings.ACCOUNTS_ACTIVATION_SECONDS)
    return ACTIVE if timezone.now() >= ready_at else PENDING


def account_as_json(account: Account) -> dict:
    return {
        "id": account.account_id,
        "idempotency_key": account.idempotency_key,
        "fingerprint": account.fingerprint,
        "status": account_status(account),
        "created_at": account.created_at.isoformat(),
    }
