"""core.db: the plain-SQL statements of the money path (issue 15). They must write and read exactly
what the ORM would (a field added later included), send a transaction's statements in one round
trip on PostgreSQL, and fail as a whole."""

from datetime import UTC, datetime
from typing import Any

import pytest
from django.db import IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext

from core import db
from core.models import AuditEvent
from core.services import audit_record
from tests.helpers import atomic_blocks_entered
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


def _run_a() -> Any:
    """A prepared run not yet written, with the public id the tests look it up by."""
    run = _prepared("run-a").run
    run.public_id = "run-a"
    return run


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


# --- whole transactions: BEGIN and COMMIT sent with the statements ------------------------------


def _keys(*names: str) -> list[db.Statement]:
    table = connection.ops.quote_name(RunKey._meta.db_table)
    run_id, params = db.Ref(VerificationRun, "run-a").sql()
    return [
        db.Statement(
            f"INSERT INTO {table} (run_id, name, value) VALUES ({run_id}, %s, %s)",  # noqa: S608
            (*params, name, "v"),
        )
        for name in names
    ]


@pytest.mark.django_db(transaction=True)
def test_a_batch_alone_in_its_transaction_is_one_round_trip_with_no_begin_or_commit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run = _run_a()
    entered = atomic_blocks_entered(monkeypatch)

    with CaptureQueriesContext(connection) as queries:
        results = db.execute_atomic([db.insert(run), *_keys("one", "two")])

    assert len(queries.captured_queries) == 1
    assert not entered
    assert results[1:] == [1, 1]
    assert RunKey.objects.filter(run__public_id="run-a").count() == 2
    assert not db.in_transaction()  # committed: nothing left open on the server


@pytest.mark.django_db(transaction=True)
def test_a_failing_statement_keeps_nothing_of_a_batch_alone_in_its_transaction() -> None:
    run = _run_a()
    with pytest.raises(IntegrityError):
        db.execute_atomic([db.insert(run), *_keys("one", "one")])  # the key's unique constraint

    assert not VerificationRun.objects.filter(public_id="run-a").exists()
    assert not db.in_transaction()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("outside", [True, False], ids=["fused", "inside-atomic"])
def test_must_change_keeps_nothing_when_its_statement_changed_no_row(outside: bool) -> None:
    """The guard of a conditional UPDATE (a leg recorded meanwhile): no row changed, nothing of the
    transaction kept, NothingChanged raised; one row changed, its count answered. The same on the
    fused path and inside a caller's transaction (a savepoint)."""
    table = connection.ops.quote_name(VerificationRun._meta.db_table)
    run = _run_a()
    set_attempt = db.Statement(
        f"UPDATE {table} SET attempts_made = 2 WHERE public_id = %s AND attempts_made = %s",  # noqa: S608
        ("run-a", 0),
    )

    def attempt(statements: list[db.Statement]) -> list[Any]:
        if outside:
            return db.execute_atomic(statements, must_change=1)
        with transaction.atomic():  # a caller's transaction, which goes on afterwards
            try:
                return db.execute_atomic(statements, must_change=1)
            except db.NothingChanged:
                assert VerificationRun.objects.filter(public_id="run-a").exists()  # still usable
                raise

    results = attempt([db.insert(run), set_attempt, *_keys("one")])
    assert results[1] == 1
    assert VerificationRun.objects.get(public_id="run-a").attempts_made == 2

    again = _prepared("run-b").run
    again.public_id = "run-b"
    with pytest.raises(db.NothingChanged):  # attempts_made is 2 now: the UPDATE changes no row
        attempt([db.insert(again), set_attempt, *_keys("two")])
    assert not VerificationRun.objects.filter(public_id="run-b").exists()
    assert not RunKey.objects.filter(name="two").exists()
    assert not db.in_transaction()


@pytest.mark.django_db(transaction=True)
def test_a_transaction_of_two_batches_sends_begin_and_commit_with_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run = _run_a()
    entered = atomic_blocks_entered(monkeypatch)

    with CaptureQueriesContext(connection) as queries, db.Transaction() as block:
        block.execute([db.insert(run)])
        assert db.in_transaction()  # the server holds it open between the batches
        block.execute(_keys("one"), commit=True)

    sent = [q["sql"] for q in queries.captured_queries]
    assert len(sent) == 2
    assert sent[0].startswith("BEGIN;")
    assert sent[1].endswith("COMMIT")
    assert not entered
    assert not db.in_transaction()
    assert RunKey.objects.filter(run__public_id="run-a").count() == 1


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("failure", ["python", "sql"])
def test_a_transaction_left_by_an_exception_is_rolled_back(failure: str) -> None:
    """An exception between the batches (a refusal decided in Python) or a statement that fails:
    what the first batch wrote is gone, the connection is usable and idle."""
    run = _run_a()

    def reserve() -> None:
        with db.Transaction() as block:
            block.execute([db.insert(run)])
            if failure == "python":
                raise ValueError("refused")
            block.execute(_keys("one", "one"), commit=True)

    with pytest.raises((ValueError, IntegrityError)):
        reserve()

    assert not db.in_transaction()
    assert not VerificationRun.objects.filter(public_id="run-a").exists()


def test_inside_a_callers_transaction_the_same_calls_use_a_savepoint() -> None:
    """In a transaction already (here the test's): no BEGIN or COMMIT of its own; a failure rolls
    back only what the block wrote, and the caller's transaction goes on."""
    kept = _prepared("kept").run
    kept.save()
    run = _run_a()

    def reserve() -> None:
        with db.Transaction() as block:
            block.execute([db.insert(run)])
            block.execute(_keys("one", "one"), commit=True)

    with CaptureQueriesContext(connection) as queries, pytest.raises(IntegrityError):
        reserve()

    assert not any(q["sql"].startswith(("BEGIN", "COMMIT")) for q in queries.captured_queries)
    assert any("SAVEPOINT" in q["sql"] for q in queries.captured_queries)
    assert not VerificationRun.objects.filter(public_id="run-a").exists()
    assert VerificationRun.objects.filter(pk=kept.pk).exists()


@pytest.mark.django_db(transaction=True)
def test_a_transaction_whose_connection_broke_raises_the_callers_error_and_reconnects() -> None:
    """The server ended the connection mid-transaction (a restart, a terminated backend): leaving
    the block raises the caller's own exception, not the failed ROLLBACK's, and the next query
    runs on a new connection (nothing of the transaction was kept)."""
    import psycopg

    run = _run_a()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (pid,) = cursor.fetchone()

    given = connection.settings_dict
    dsn = {
        "host": given["HOST"] or "127.0.0.1",
        "port": given["PORT"] or 5432,
        "user": given["USER"],
        "dbname": given["NAME"],
    }

    def reserve() -> None:
        with db.Transaction() as block:
            block.execute([db.insert(run)])
            with psycopg.connect(**dsn, autocommit=True) as other:
                other.execute("SELECT pg_terminate_backend(%s)", [pid])
            raise ValueError("refused")

    with pytest.raises(ValueError, match="refused"):
        reserve()

    assert not VerificationRun.objects.filter(public_id="run-a").exists()


# --- on_commit and a fused transaction (docs/decisions/0006-fused-transactions.md) ---------------
#
# Django knows nothing of a fused transaction's BEGIN: left alone, it would see autocommit and run
# an `on_commit` callback at once, before the COMMIT (a task enqueued for a row that may yet roll
# back). Inside a fused transaction Django is told a transaction is open: `on_commit` refuses.


@pytest.mark.django_db(transaction=True)
def test_on_commit_inside_a_fused_transaction_is_refused_and_never_runs_early() -> None:
    run = _run_a()
    ran: list[str] = []

    with db.Transaction() as block:
        assert block.fused
        block.execute([db.insert(run)])
        with pytest.raises(transaction.TransactionManagementError):
            transaction.on_commit(lambda: ran.append("early"))
        block.execute(_keys("one"), commit=True)

    assert ran == []
    assert RunKey.objects.filter(run__public_id="run-a").count() == 1  # the transaction went on

    assert not db.in_transaction()


@pytest.mark.django_db(transaction=True)
def test_after_a_fused_transaction_commits_django_is_back_in_autocommit() -> None:
    run = _run_a()
    ran: list[str] = []

    with db.Transaction() as block:
        block.execute([db.insert(run)])
        block.execute(_keys("one"), commit=True)

    assert connection.get_autocommit()
    with transaction.atomic():
        transaction.on_commit(lambda: ran.append("after commit"))
        assert ran == []
    assert ran == ["after commit"]
    assert RunKey.objects.filter(run__public_id="run-a").count() == 1


@pytest.mark.django_db(transaction=True)
def test_an_orm_write_inside_a_fused_transaction_joins_it_and_rolls_back_with_it() -> None:
    """Django, told a transaction is open, neither commits nor begins one of its own: an ORM call
    inside writes into the fused transaction and is undone with it."""
    run = _run_a()

    def refused() -> None:
        with db.Transaction() as block:
            block.execute([db.insert(run)])
            audit_record(actor=None, action="test.inside", target_type="run", target_id="run-a")
            raise ValueError("refused")

    with pytest.raises(ValueError, match="refused"):
        refused()

    assert connection.get_autocommit()
    assert not db.in_transaction()
    assert not VerificationRun.objects.filter(public_id="run-a").exists()
    assert not AuditEvent.objects.filter(action="test.inside").exists()
