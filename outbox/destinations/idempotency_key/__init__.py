"""The `idempotency_key_http` kind: a JSON-over-HTTP API on the IETF Idempotency-Key header draft (`destination`),
its configuration (`config`), credentials (`auth`), where its provider keeps the key (`placement`) and what its
answers mean (`contract`)."""
