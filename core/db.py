"""Database helpers shared by the apps."""

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from django.db import DatabaseError, DataError, connection, migrations, models, transaction

_PG_FUNCTION = """
CREATE OR REPLACE FUNCTION vouch_refuse_change() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'rows of % are append-only: % refused', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'integrity_constraint_violation';
END;
$$ LANGUAGE plpgsql;
"""


def append_only(table: str) -> migrations.RunPython:
    """A migration operation that makes the database itself refuse UPDATE and DELETE on `table`
    (PostgreSQL and SQLite), so no code path, admin action or shell session can rewrite history.
    TRUNCATE, used only to reset test databases, is not affected."""

    def forwards(apps: Any, schema_editor: Any) -> None:
        vendor = schema_editor.connection.vendor
        if vendor == "postgresql":
            schema_editor.execute(_PG_FUNCTION, params=None)
            schema_editor.execute(
                f"CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table} "
                "FOR EACH ROW EXECUTE FUNCTION vouch_refuse_change();"
            )
        elif vendor == "sqlite":
            for op in ("UPDATE", "DELETE"):
                schema_editor.execute(
                    f"CREATE TRIGGER {table}_no_{op.lower()} BEFORE {op} ON {table} "
                    f"BEGIN SELECT RAISE(ABORT, 'rows of {table} are append-only: {op} refused');"
                    " END;"
                )
        else:  # pragma: no cover - Vouch runs on PostgreSQL, and SQLite for local runs only
            raise NotImplementedError(f"append-only triggers are not written for {vendor}")

    def backwards(apps: Any, schema_editor: Any) -> None:
        vendor = schema_editor.connection.vendor
        if vendor == "postgresql":
            schema_editor.execute(f"DROP TRIGGER IF EXISTS {table}_append_only ON {table};")
        elif vendor == "sqlite":
            for op in ("update", "delete"):
                schema_editor.execute(f"DROP TRIGGER IF EXISTS {table}_no_{op};")

    return migrations.RunPython(forwards, backwards, elidable=False)


def transaction_lock(name: str) -> None:
    """Hold a lock named `name` until the current transaction ends (PostgreSQL's
    pg_advisory_xact_lock on a 64-bit digest of the name; re-entrant within one transaction).
    Two transactions that must see each other's writes (each decides, and each looks for what the
    other decided) take it first: the second waits and then reads what the first committed.
    SQLite (`make run`) lets one writer in at a time already, so it needs nothing more."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError(f"transaction_lock({name!r}) outside a transaction holds nothing")
    if connection.vendor != "postgresql":
        return
    key = int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "big", signed=True)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [key])


def without_like_indexes(model_name: str, *field_names: str) -> migrations.RunPython:
    """A migration operation dropping the second index PostgreSQL gets for each unique or indexed
    CharField (`…_like`, varchar_pattern_ops: for LIKE 'prefix%' only). Nothing here searches
    these columns by prefix (the admin's searches are `icontains`, which no btree serves), and on
    the money path each such index is one more entry written per INSERT and per non-HOT UPDATE.
    Other databases have no such index. Backwards: made again, as Django made it."""

    def each(apps: Any, schema_editor: Any) -> list[tuple[str, str, str]]:
        if schema_editor.connection.vendor != "postgresql":
            return []
        model = apps.get_model(model_name)
        table = model._meta.db_table
        found = []
        for name in field_names:
            column = model._meta.get_field(name).column
            index = schema_editor._create_index_name(table, [column], suffix="_like")
            found.append((table, column, index))
        return found

    def forwards(apps: Any, schema_editor: Any) -> None:
        for _, _, index in each(apps, schema_editor):
            schema_editor.execute(f"DROP INDEX IF EXISTS {schema_editor.quote_name(index)}")

    def backwards(apps: Any, schema_editor: Any) -> None:
        quote = schema_editor.quote_name
        for table, column, index in each(apps, schema_editor):
            schema_editor.execute(
                f"CREATE INDEX IF NOT EXISTS {quote(index)} ON {quote(table)} "
                f"({quote(column)} varchar_pattern_ops)"
            )

    return migrations.RunPython(forwards, backwards, elidable=False)


# --- batches of plain SQL: the money path's hot statements ---------------------------------------
#
# A refund reserves in one transaction and records in another; through the ORM each of their
# statements cost a round trip and several times its execution in Django's own CPU (building the
# SQL). These helpers build the same statements from the models' own fields (so a field added
# later is written with its default, as by the ORM) and send a transaction's statements together:
# on PostgreSQL in one round trip, elsewhere (SQLite under `make run`) one by one. Measured in
# bench/README.md (issue 15).


M = TypeVar("M", bound=models.Model)
BATCH_SEPARATOR = ";\n"


@dataclass(frozen=True)
class Statement:
    """One SQL statement with `%s` placeholders; `rows`: it returns rows (SELECT, RETURNING)."""

    sql: str
    params: tuple[Any, ...] = ()
    rows: bool = False


@dataclass(frozen=True)
class Ref:
    """The id of a row found by a unique column, for a statement of the same batch that refers to a
    row an earlier statement inserts (its id is not known before the batch runs)."""

    model: type[models.Model]
    value: Any
    column: str = "public_id"

    def sql(self) -> tuple[str, tuple[Any, ...]]:
        table = _table(self.model)
        column = connection.ops.quote_name(self.column)
        return f"(SELECT {table.pk} FROM {table.name} WHERE {column} = %s)", (self.value,)  # noqa: S608


def _one_round_trip() -> bool:
    """Several statements in one `execute`: PostgreSQL with client-side binding (Django's default
    with psycopg 3 sends them as one simple query); not SQLite, nor server-side binding."""
    return connection.vendor == "postgresql" and not connection.settings_dict.get(
        "OPTIONS", {}
    ).get("server_side_binding")


def execute(statements: Sequence[Statement]) -> list[Any]:
    """Run `statements` in order on the default connection and give, for each, its rows (a list of
    tuples) if it returns rows, else its row count. Call it inside the transaction they belong to:
    a statement that fails raises, and the transaction rolls back as with the ORM."""
    results: list[Any] = []
    if not statements:
        return results
    with connection.cursor() as cursor:
        if len(statements) > 1 and _one_round_trip():
            raw = cursor.cursor
            # Each statement merged with its parameters as psycopg would (its client-side binding),
            # one at a time: psycopg caches the parsing of short statements, never of a long batch.
            cursor.execute(
                BATCH_SEPARATOR.join(
                    raw.mogrify(statement.sql, statement.params) for statement in statements
                )
            )
            for index, statement in enumerate(statements):
                if index and not raw.nextset():
                    raise RuntimeError("a batch answered fewer results than it has statements")
                results.append(raw.fetchall() if statement.rows else raw.rowcount)
            return results
        for statement in statements:
            cursor.execute(statement.sql, list(statement.params))
            results.append(cursor.fetchall() if statement.rows else cursor.rowcount)
    return results


# --- whole transactions in fewer round trips ---------------------------------------------------
#
# Through `transaction.atomic()`, psycopg sends BEGIN and COMMIT each as a round trip of its own: a
# refund's two transactions cost four waits more than their statements. On PostgreSQL, outside any
# transaction (autocommit, as Django runs a request), they are sent with the statements instead:
# a batch alone in its transaction is one simple query, which PostgreSQL runs as one implicit
# transaction (all of it or none of it); a transaction of several batches opens with a BEGIN in its
# first batch and ends with a COMMIT in its last. Inside an atomic block (a caller's transaction, a
# test's), on SQLite, or with server-side binding, the same calls run inside `transaction.atomic()`
# (a savepoint when nested): the same outcome, in more round trips.

_ROLLBACK_ONLY = "22012"  # division_by_zero: what `must_change`'s guard raises when nothing changed


class NothingChanged(Exception):
    """The statement `must_change` named changed no row: the transaction was rolled back."""


def _fused() -> bool:
    """BEGIN and COMMIT can travel with the statements: PostgreSQL with client-side binding, in
    autocommit (no transaction open, neither Django's nor the server's)."""
    return (
        _one_round_trip()
        and not connection.in_atomic_block
        and connection.get_autocommit()
        and not server_transaction_open()
    )


def server_transaction_open() -> bool:
    """The server holds a transaction open on the default connection (PostgreSQL's own status:
    it sees a transaction that Django's atomic blocks do not, e.g. a `Transaction` in progress)."""
    raw = connection.connection
    if connection.vendor != "postgresql" or raw is None:
        return False
    from psycopg.pq import TransactionStatus

    # IDLE: none; UNKNOWN: a broken connection, which holds nothing to roll back.
    return raw.pgconn.transaction_status in (TransactionStatus.INTRANS, TransactionStatus.INERROR)


def in_transaction() -> bool:
    """A transaction is open on the default connection, by Django's account or the server's."""
    return connection.in_atomic_block or server_transaction_open()


def _guarded(statement: Statement) -> Statement:
    """`statement` (an UPDATE or DELETE without RETURNING) answering its row count, and failing
    (division by zero) when it changed no row, which rolls its whole transaction back."""
    return Statement(
        f"WITH changed AS ({statement.sql} RETURNING 1) "  # noqa: S608
        "SELECT count(*), 1 / count(*) FROM changed",
        statement.params,
        rows=True,
    )


def _nothing_changed(error: Exception) -> bool:
    return getattr(error.__cause__, "sqlstate", None) == _ROLLBACK_ONLY


def execute_atomic(statements: Sequence[Statement], *, must_change: int | None = None) -> list[Any]:
    """`execute(statements)` as one transaction of their own: one round trip on PostgreSQL outside
    any transaction (no BEGIN, no COMMIT), else inside `transaction.atomic()`. `must_change`: the
    index of a statement (UPDATE or DELETE) that must change a row, else nothing is kept and
    NothingChanged is raised (its result is its row count either way)."""
    if _fused() and len(statements) > 1:
        batch = list(statements)
        if must_change is not None:
            batch[must_change] = _guarded(batch[must_change])
        try:
            results = execute(batch)
        except DataError as error:
            if _nothing_changed(error):
                raise NothingChanged from error
            raise
        if must_change is not None:
            results[must_change] = results[must_change][0][0]
        return results
    with transaction.atomic():
        results = execute(statements)
        if must_change is not None and not results[must_change]:
            raise NothingChanged
    return results


_BEGIN = Statement("BEGIN")
_COMMIT = Statement("COMMIT")


class Transaction:
    """One transaction of several batches (`execute`, the last with `commit=True`), as a context.
    Fused (see above): the first batch opens it with BEGIN and the last closes it with COMMIT, in
    their own round trips; an exception leaving the block, or a batch that failed, rolls it back
    (ROLLBACK, one round trip more on that path only). Otherwise: `transaction.atomic()`.

    While a fused transaction is open, Django is told that the connection is not in autocommit
    (its own flag only: psycopg's is untouched, so nothing sends a BEGIN of its own). So
    `transaction.on_commit` refuses with TransactionManagementError instead of running its
    callback at once, before the COMMIT; an ORM call inside joins the transaction (an atomic block
    neither begins nor commits one); and a nested `execute_atomic` is not fused again. Enqueue work
    after the block ends (docs/decisions/0006-fused-transactions.md)."""

    def __init__(self) -> None:
        self.fused = False
        self._atomic: Any = None
        self._begun = False
        self._committed = False

    def __enter__(self) -> "Transaction":
        self.fused = _fused()
        if not self.fused:
            self._atomic = transaction.atomic()
            self._atomic.__enter__()
            return self
        connection.autocommit = False  # Django's view only; see the class docstring
        return self

    def execute(self, statements: Sequence[Statement], *, commit: bool = False) -> list[Any]:
        if not self.fused:
            return execute(statements)
        if self._committed:
            raise RuntimeError("this transaction is committed already")
        head = [] if self._begun else [_BEGIN]
        tail = [_COMMIT] if commit else []
        self._begun = True
        results = execute([*head, *statements, *tail])
        self._committed = commit
        return results[len(head) : len(results) - len(tail)]

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if not self.fused:
            self._atomic.__exit__(exc_type, exc, tb)
            return
        try:
            if exc_type is None and self._begun and not self._committed:
                self.execute([], commit=True)
            elif server_transaction_open():  # an exception, or a batch that failed
                try:
                    with connection.cursor() as cursor:
                        cursor.execute("ROLLBACK")
                except DatabaseError:  # the connection broke: the server ends it itself
                    connection.close()
        finally:
            connection.autocommit = True


def insert(obj: models.Model, *, unless_conflict: bool = False, **refs: Ref) -> Statement:
    """The INSERT the ORM's `save()` of a new `obj` makes (every concrete field but the automatic
    id, each prepared by its field: defaults and `auto_now_add` included), RETURNING the id. `refs`:
    foreign keys (by attname, e.g. `operation_id`) to rows inserted earlier in the same batch.
    `unless_conflict`: ON CONFLICT DO NOTHING (a row that a unique constraint refuses is not
    inserted, and no row is returned; PostgreSQL and SQLite)."""
    table = _table(type(obj))
    placeholders: list[str] = []
    params: list[Any] = []
    for field in table.insert_fields:
        if field.attname in refs:
            sql, values = refs[field.attname].sql()
            placeholders.append(sql)
            params.extend(values)
        else:
            placeholders.append("%s")
            params.append(field.get_db_prep_save(field.pre_save(obj, add=True), connection))
    conflict = "ON CONFLICT DO NOTHING " if unless_conflict else ""
    return Statement(
        f"INSERT INTO {table.name} ({table.insert_columns}) VALUES ({', '.join(placeholders)}) "  # noqa: S608
        f"{conflict}RETURNING {table.pk}",
        tuple(params),
        rows=True,
    )


def inserted(obj: models.Model, rows: list[tuple[Any, ...]]) -> None:
    """Mark `obj` saved with the id its `insert` statement returned."""
    obj.pk = rows[0][0]
    obj._state.adding = False
    obj._state.db = connection.alias


def select(
    model: type[models.Model],
    where: str,
    params: Sequence[Any],
    *,
    order_by: str = "",
    lock: bool = False,
    also: str = "",
) -> Statement:
    """SELECT every concrete column of `model`'s table `WHERE where` (plain SQL with `%s`), for
    `instances`. `lock`: FOR UPDATE where the database has it (PostgreSQL; SQLite lets one writer
    in at a time and ignores it, as the ORM's `select_for_update` does). `also`: one more column
    (an SQL expression), last in each row."""
    table = _table(model)
    columns = f"{table.select_columns}, {also}" if also else table.select_columns
    sql = f"SELECT {columns} FROM {table.name} WHERE {where}"  # noqa: S608
    if order_by:
        sql += f" ORDER BY {order_by}"
    if lock and connection.features.has_select_for_update:
        sql += " FOR UPDATE"
    return Statement(sql, tuple(params), rows=True)


def columns(model: type[models.Model]) -> str:
    """Every concrete column of `model`'s table, in the order `instances` reads them (for a
    RETURNING)."""
    return _table(model).select_columns


def instances(model: type[M], rows: list[tuple[Any, ...]]) -> list[M]:
    """Model instances from the rows of a `select(model, …)`, each value converted as the ORM does
    (SQLite's datetimes, JSON, decimals); a column `also` selected is left out."""
    table = _table(model)
    width = len(table.attnames)
    alias = connection.alias
    result = []
    for row in rows:
        values = list(row[:width])
        for index, column, chain in table.converters:
            for convert in chain:
                values[index] = convert(values[index], column, connection)
        result.append(model.from_db(alias, table.attnames, values))
    return result


@dataclass(frozen=True)
class _Table:
    """What the statements above need of a model, for one database vendor: worked out once
    (quoting every column on every statement was a tenth of a refund's CPU, measured)."""

    name: str
    pk: str
    insert_fields: list[Any]
    insert_columns: str
    select_columns: str
    attnames: list[str]
    converters: list[tuple[int, Any, list[Any]]]


def _table(model: type[models.Model]) -> _Table:
    key = (connection.vendor, model)
    found = _TABLES.get(key)
    if found is None:
        found = _TABLES[key] = _table_of(model)
    return found


def _table_of(model: type[models.Model]) -> _Table:
    meta = model._meta
    quote = connection.ops.quote_name
    fields = meta.concrete_fields
    inserted_fields = [field for field in fields if field is not meta.auto_field]
    converters = []
    for index, field in enumerate(fields):
        column = field.get_col(meta.db_table)
        chain = connection.ops.get_db_converters(column) + field.get_db_converters(connection)
        if chain:
            converters.append((index, column, chain))
    return _Table(
        name=quote(meta.db_table),
        pk=quote(str(meta.pk.column)),
        insert_fields=inserted_fields,
        insert_columns=", ".join(quote(str(field.column)) for field in inserted_fields),
        select_columns=", ".join(quote(str(field.column)) for field in fields),
        attnames=[field.attname for field in fields],
        converters=converters,
    )


_TABLES: dict[tuple[str, type[models.Model]], _Table] = {}
