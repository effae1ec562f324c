"""Database helpers shared by the apps."""

import hashlib
from typing import Any

from django.db import connection, migrations, transaction

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
