"""core.db: the plain-SQL statements of the money path (issue 15). They must write and read exactly
what the ORM would (a field added later included), send a transaction's statements in one round
trip on PostgreSQL, and fail as a whole."""

from datetime import UTC, datetime
from typing import Any

import pytest
from django.db import IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext

from core import db
from verification.models import RunKey, VerificationRun
from verification.services import verification_prepare

pytestmark = pytest.mark.django_db

CREATED = datetime(2026, 11, 30, 12, 0, 0, 123456, tzinfo=UTC)


def _prepared(operation_id: str) -> Any:
    return verification_prepare(
        contract_id="stripe.refund.created",
        operation_id=operation_id,
        operation_created_at=CREATED,
        input={"charge": "ch_1", "amount": 125},
        action_result={"id": "re_1", "object": "refund", "charge": "ch_1", "amount": 125,
                       "status": "succeeded", "metadata": {"vouch_leg": "rleg_1"}},
    )  # fmt: skip


def _fields(run: VerificationRun) -> dict[str, Any]:
    skip = {"id", "public_id", "created_at", "operation_id"}
    values = {
        field.attname: getattr(run, field.attname)
        for field in VerificationRun._meta.concrete_fields
        if field.attname not in skip
    }
    values["correlation"].pop("idempotency_key")  # the operation id, which differs
    return values


def test_insert_writes_the_row_the_orm_would_write_defaults_json_and_datetimes_included() -> None:
    by_orm = _prepared("op-orm").run
    by_orm.save()
    by_sql = _prepared("op-sql")
    with transaction.atomic():
        rows = db.execute([db.insert(by_sql.run)])[0]
    run = by_sql.saved(rows)

    assert run.pk is not None
    assert run.pk != by_orm.pk
    assert not run._state.adding
    stored_orm = VerificationRun.objects.get(pk=by_orm.pk)
    stored_sql = VerificationRun.objects.get(pk=run.pk)
    assert _fields(stored_sql) == _fields(stored_orm)
    assert stored_sql.input == {"charge": "ch_1", "amount": 125}
    assert stored_sql.action_result["metadata"] == {"vouch_leg": "rleg_1"}
    assert stored_sql.operation_created_at == CREATED
    assert stored_sql.created_at is not None
    assert stored_sql.public_id == run.public_id


def test_instances_read_back_exactly_what_the_orm_reads() -> None:
    prepared = _prepared("op-read")
    with transaction.atomic():
        run = prepared.saved(db.execute(prepared.statements())[0])

    rows = db.execute([db.select(VerificationRun, "id = %s", [run.pk])])[0]
    (read,) = db.instances(VerificationRun, rows)

    by_orm = VerificationRun.objects.get(pk=run.pk)
    for field in VerificationRun._meta.concrete_fields:
        assert getattr(read, field.attname) == getattr(by_orm, field.attname), field.name
    assert read.created_at.tzinfo is not None
    assert not read._state.adding


def test_a_batch_is_one_round_trip_on_postgresql_with_each_statements_result() -> None:
    prepared = _prepared("op-batch")
    statements = [
        *prepared.statements(),
        db.Statement("UPDATE verification_runkey SET value = value WHERE name = %s", ("charge",)),
        db.select(RunKey, "name = %s", ["nothing-has-this-name"]),
    ]
    with CaptureQueriesContext(connection) as queries, transaction.atomic():
        results = db.execute(statements)

    sent = [q["sql"] for q in queries.captured_queries if "SAVEPOINT" not in q["sql"]]
    assert len(sent) == 1  # (the test's own transaction makes the atomic block a savepoint)
    assert sent[0].count("INSERT INTO") == 2
    inserted_id = results[0][0][0]
    assert VerificationRun.objects.filter(pk=inserted_id, operation_id="op-batch").exists()
    keys = dict(RunKey.objects.filter(run_id=inserted_id).values_list("name", "value"))
    assert keys == prepared.keys
    assert keys
    assert results[1] == len(keys)
    assert results[2] == 1  # one run has a `charge` key
    assert results[3] == []


def test_a_statement_that_fails_rolls_the_whole_batch_back() -> None:
    first = _prepared("op-twice")
    with transaction.atomic():
        first.saved(db.execute(first.statements())[0])

    again = _prepared("op-twice")  # the same contract and operation: the unique run refuses it
    fresh = _prepared("op-fresh")
    with pytest.raises(IntegrityError), transaction.atomic():
        db.execute([*fresh.statements(), *again.statements()])

    assert not VerificationRun.objects.filter(operation_id="op-fresh").exists()
    assert VerificationRun.objects.filter(operation_id="op-twice").count() == 1


def test_a_ref_names_a_row_inserted_earlier_in_the_same_batch() -> None:
    prepared = _prepared("op-ref")
    ref = db.Ref(VerificationRun, prepared.run.public_id)
    sql, params = ref.sql()
    with transaction.atomic():
        results = db.execute(
            [db.insert(prepared.run), db.Statement(f"SELECT {sql}", params, rows=True)]
        )
    assert results[1] == [(results[0][0][0],)]


def test_no_statements_touch_no_connection() -> None:
    with CaptureQueriesContext(connection) as queries:
        assert db.execute([]) == []
    assert queries.captured_queries == []
