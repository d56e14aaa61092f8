"""A Stripe-style API for the tests: the key in the `Idempotency-Key` header, written from Stripe's public
docs (https://docs.stripe.com/api/idempotent_requests, https://docs.stripe.com/error-low-level#idempotency):

    POST /v1/customers   Authorization: Bearer <secret key>, Idempotency-Key: K, a JSON object
        -> 200 {"id": "cus_…", "object": "customer", "created": …, "email", "name", "metadata", …}
    DELETE /v1/customers/<id>   (https://docs.stripe.com/api/customers/delete; an Idempotency-Key is
        ignored, as Stripe does for DELETE) -> 200 {"id", "object": "customer", "deleted": true}, or 404
        {"error": {"type": "invalid_request_error", "code": "resource_missing", …}} when it is gone

The first answer to a key is saved and replayed to a repeat with the same parameters (header
`Idempotent-Replayed: true`), never a second customer; the same key with other parameters is a 400 whose
`error.type` is `idempotency_error`; a repeat while the first is still executing is a 409
`idempotency_key_in_use` (switch `in_progress`: {key: n}). Stripe's v1 endpoints read form-encoded
parameters; this server reads the same parameters as a JSON object (as Stripe's v2 endpoints do), because the
`idempotency_key_http` kind sends JSON. Stripe offers no lookup by idempotency key: a lost answer is settled
by sending the same request again. A wrong secret key is answered 401. An effect is a live customer; they
are counted per idempotency key (a deleted customer is not counted).
"""

import hashlib
import json

from tests.providers.harness import Answer, Call, Provider, serve, token_from_environment

CUSTOMERS = "/v1/customers"


class Stripe(Provider):
    def __init__(self, token: str | None):
        super().__init__(token)
        self.customers: dict[str, dict] = {}  # by id
        self.saved: dict[str, tuple[str, Answer]] = {}  # key -> (parameters' fingerprint, answer)
        self.created_by_key: dict[str, list[str]] = {}
        self.in_progress: dict[str, int] = {}

    def unauthorized(self) -> Answer:
        return Answer(401, _error("invalid_request_error", "Invalid API Key provided."))

    def set_faults(self, faults: dict) -> None:
        self.in_progress.update(faults.get("in_progress", {}))

    def route(self, call: Call) -> Answer:
        if call.path.startswith(CUSTOMERS + "/") and call.method == "DELETE":
            return self._delete(call.path[len(CUSTOMERS) + 1 :])
        if call.path != CUSTOMERS or call.method != "POST":
            return Answer(
                404, _error("invalid_request_error", f"Unrecognized request URL ({call.path}).")
            )
        if not isinstance(call.body, dict):
            return Answer(400, _error("invalid_request_error", "Invalid request body."))
        key = call.headers.get("idempotency-key")
        if key is None:
            return self._create(call.body, None)
        fingerprint = hashlib.sha256(json.dumps(call.body, sort_keys=True).encode()).hexdigest()
        if self.in_progress.get(key, 0) > 0:
            self.in_progress[key] -= 1
            return Answer(
                409,
                _error(
                    "invalid_request_error",
                    "There is currently another in-progress request using this Idempotent Key.",
                    code="idempotency_key_in_use",
                ),
            )
        if key in self.saved:
            saved_fingerprint, saved = self.saved[key]
            if saved_fingerprint != fingerprint:
                return Answer(
                    400,
                    _error(
                        "idempotency_error",
                        "Keys for idempotent requests can only be used with the same parameters "
                        "they were first used with.",
                    ),
                )
            return Answer(saved.status, saved.body, {"Idempotent-Replayed": "true"})
        answer = self._create(call.body, key)
        self.saved[key] = (fingerprint, answer)
        return answer

    def _create(self, parameters: dict, key: str | None) -> Answer:
        number = sum(len(ids) for ids in self.created_by_key.values()) + 1
        customer = {
            "id": f"cus_T{number:05d}",
            "object": "customer",
            "created": 1767225600 + number,
            "livemode": False,
            "metadata": {},
            **parameters,
        }
        self.customers[customer["id"]] = customer
        self.created_by_key.setdefault(key or "", []).append(customer["id"])
        return Answer(200, customer, {"Request-Id": f"req_{number}"}, committed=True)

    def _delete(self, customer_id: str) -> Answer:
        if self.customers.pop(customer_id, None) is None:
            return Answer(
                404,
                _error(
                    "invalid_request_error",
                    f"No such customer: '{customer_id}'",
                    code="resource_missing",
                ),
            )
        return Answer(
            200, {"id": customer_id, "object": "customer", "deleted": True}, committed=True
        )

    def records(self) -> list[dict]:
        return list(self.customers.values())

    def effects(self) -> dict[str, int]:
        live = {
            key: len([i for i in ids if i in self.customers])
            for key, ids in self.created_by_key.items()
        }
        return {key: n for key, n in live.items() if n}


def _error(kind: str, message: str, code: str | None = None) -> dict:
    error = {"type": kind, "message": message}
    if code:
        error["code"] = code
    return {"error": error}


if __name__ == "__main__":
    serve(Stripe(token_from_environment()))
