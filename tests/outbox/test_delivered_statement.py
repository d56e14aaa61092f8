"""The shape of the one-statement record of deliveries (`outbox/delivered.py`) on PostgreSQL.

Its text must not grow with the batch: psycopg converts a statement's text once per process only when it is
short and takes few parameters, and PostgreSQL parses one array per field instead of one cast per cell. A
field every row sets to the same value (the failure fields a delivery clears) travels once, not per row;
the rows still get their own values where they differ."""

from datetime import UTC, datetime

import pytest
from django.db import connection
from django.db.models import Field
from psycopg.types.numeric import Int4, Int8

from outbox.bulk_writes import prepared
from outbox.failures import DeliveryResult
from outbox.models import Attempt, AttemptOutcome, Handoff, HandoffState
from outbox.services import handoff_claim_due, handoff_record_outcomes
from tests.outbox.scripted_destination import ScriptedDestination

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(databases=["default", "delivery"])]
S = HandoffState
# How each delivered row's outcome became known (its reason code, issue 37 item 6).
_CODES = {AttemptOutcome.CREATED: "created", AttemptOutcome.DUPLICATE: "duplicate_prevented"}


def _record(claims, created) -> tuple[str, int]:
    """Record every claim as delivered; the statement's text and its number of parameters."""
    seen = []

    def capture(execute, sql, params, many, context):
        seen.append((sql, len(params or ())))
        return execute(sql, params, many, context)

    outcomes = [
        (
            claim,
            DeliveryResult.ok(
                task_id=f"t{claim.handoff_id}", created=is_new, status_code=201, latency_ms=3 + n
            ),
        )
        for n, (claim, is_new) in enumerate(zip(claims, created, strict=True))
    ]
    with connection.execute_wrapper(capture):
        recorded = handoff_record_outcomes(outcomes=outcomes, destination=ScriptedDestination())
    assert recorded.states == [S.DELIVERED] * len(claims)
    [(sql, params)] = seen
    return sql, params


def test_the_statement_is_the_same_text_for_any_number_of_rows(make_handoff):
    if connection.vendor != "postgresql":
        pytest.fail("needs PostgreSQL; `make test` runs it there")
    for n in range(1, 8):
        make_handoff(n)
    two = handoff_claim_due(worker="w1", limit=2)
    five = handoff_claim_due(worker="w1", limit=5)
    small = _record(two, [True, False])
    large = _record(five, [True, False, True, True, False])
    assert small == large, "the text or the parameter count grew with the rows"
    assert len(small[0]) < 4096 and small[1] <= 50, (
        "too long or too many parameters for psycopg's cache"
    )


def test_values_shared_by_every_row_are_sent_once_and_the_rest_per_row(make_handoff):
    if connection.vendor != "postgresql":
        pytest.fail("needs PostgreSQL; `make test` runs it there")
    handoffs = [
        make_handoff(n, failure_class="transient", reason_code="http_503", last_error="boom")
        for n in (1, 2, 3)
    ]
    claims = handoff_claim_due(worker="w1")
    sql, _params = _record(claims, [True, False, True])
    assert '"h_failure_class"' not in sql and '"a_outcome"' in sql, sql
    for handoff, outcome in zip(
        handoffs,
        [AttemptOutcome.CREATED, AttemptOutcome.DUPLICATE, AttemptOutcome.CREATED],
        strict=True,
    ):
        row = Handoff.objects.get(pk=handoff.pk)
        assert (
            row.state,
            row.destination_id,
            row.failure_class,
            row.reason_code,
            row.last_error,
        ) == (S.DELIVERED, f"t{handoff.pk}", "", _CODES[outcome], "")
        attempt = Attempt.objects.get(handoff=handoff)
        assert (attempt.outcome, attempt.status_code) == (outcome, 201)
    latencies = sorted(
        Attempt.objects.filter(handoff__in=handoffs).values_list("latency_ms", flat=True)
    )
    assert latencies == [3, 4, 5]
    reasons = [
        Handoff.objects.get(pk=h.pk).events.get(to_state=S.DELIVERED).reason for h in handoffs
    ]
    assert reasons[1].endswith("(duplicate prevented)") and not reasons[0].endswith(
        "(duplicate prevented)"
    )


def test_each_rows_own_receipt_is_stored_and_the_receipts_travel_as_one_json_document(make_handoff):
    """An array of `jsonb` values is quoted on the client element by element; the receipts go as one JSON
    array instead, each row taking its own element."""
    if connection.vendor != "postgresql":
        pytest.fail("needs PostgreSQL; `make test` runs it there")
    handoffs = [make_handoff(n) for n in (1, 2, 3)]
    claims = handoff_claim_due(worker="w1")
    seen = []

    def capture(execute, sql, params, many, context):
        seen.append(sql)
        return execute(sql, params, many, context)

    outcomes = [
        (
            claim,
            DeliveryResult.ok(
                task_id=f"t{claim.handoff_id}",
                created=True,
                status_code=201,
                receipt={"task_id": f"t{claim.handoff_id}", "status": "open", "n": n},
            ),
        )
        for n, claim in enumerate(claims)
    ]
    with connection.execute_wrapper(capture):
        recorded = handoff_record_outcomes(outcomes=outcomes, destination=ScriptedDestination())
    assert recorded.states == [S.DELIVERED] * 3
    [sql] = seen
    assert "jsonb[]" not in sql, sql
    by_id = {claim.handoff_id: n for n, claim in enumerate(claims)}
    for handoff in handoffs:
        row = Handoff.objects.get(pk=handoff.pk)
        assert row.receipt == {
            "task_id": f"t{handoff.pk}",
            "status": "open",
            "n": by_id[handoff.pk],
        }
        assert row.destination_id == f"t{handoff.pk}"


def test_a_cell_is_prepared_by_its_columns_conversion_not_by_its_field(make_handoff, monkeypatch):
    """Django's preparation of a field (four calls a cell) runs for the values every row shares and the
    datetimes and JSON, never once per row for an id, a fencing token, a code or a latency: those take their
    column's conversion, looked up once. The arrays keep the types Django would send."""
    if connection.vendor != "postgresql":
        pytest.fail("needs PostgreSQL; `make test` runs it there")
    calls = []
    prepare = Field.get_db_prep_save

    def counted(field, value, connection):
        calls.append(field.name)
        return prepare(field, value, connection)

    monkeypatch.setattr(Field, "get_db_prep_save", counted)
    seen = []

    def capture(execute, sql, params, many, context):
        seen.append(params)
        return execute(sql, params, many, context)

    for n in range(1, 9):
        make_handoff(n)
    prepared_for = []
    for limit in (2, 6):
        del calls[:]
        claims = handoff_claim_due(worker="w1", limit=limit)
        with connection.execute_wrapper(capture):
            _record(claims, [True] * limit)
        prepared_for.append(len(calls))
    assert prepared_for[0] == prepared_for[1], f"preparations grew with the rows: {prepared_for}"
    arrays = [param for param in seen[-1] if isinstance(param, list)]
    epochs, latencies = arrays[1], arrays[-1]
    assert {type(value) for value in epochs} == {Int8}, epochs
    assert {type(value) for value in latencies} == {Int4}, latencies
    assert sorted(
        Attempt.objects.filter(finished_at__isnull=False).values_list("latency_ms", flat=True)
    ) == [3, 3, 4, 4, 5, 6, 7, 8]


@pytest.mark.parametrize(
    ("model", "name", "values"),
    [
        (Handoff, "id", [1, 2**40, None]),
        (Handoff, "fencing_epoch", [0, 2**40, None]),
        (Attempt, "status_code", [201, None, True]),
        (Attempt, "latency_ms", [0, 1500, None]),
        (Handoff, "destination_id", ["t1", "", None, S.DELIVERED]),
        (Attempt, "detail", ["boom", ""]),
        (Handoff, "receipt", [{"a": 1}, None]),
        (Handoff, "lease_expires_at", [None, datetime(2026, 12, 7, 2, 0, tzinfo=UTC)]),
    ],
)
def test_prepared_values_are_what_the_field_would_send(model, name, values):
    """Same value, same type as `Field.get_db_prep_save`, whether converted by its column or by its field."""
    field = model._meta.get_field(name)
    expected = [field.get_db_prep_save(value, connection) for value in values]
    got = prepared(connection, field, values)
    assert [type(value) for value in got] == [type(value) for value in expected]
    assert [getattr(v, "obj", v) for v in got] == [getattr(v, "obj", v) for v in expected]
