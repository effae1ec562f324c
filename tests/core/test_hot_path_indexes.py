"""The refund path's tables carry only the indexes something reads (issue 15): every index is
one more entry written per INSERT, and per UPDATE of an indexed column. Django adds a `_like`
(varchar_pattern_ops) index beside each unique or indexed CharField on PostgreSQL, for LIKE
'prefix%' searches that nothing here makes; migrations drop them, and can make them again."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)

TABLES = ("envelopes_refundleg", "envelopes_refundoperation", "verification_verificationrun")
DROPPED = [
    ("envelopes", "0004_no_like_indexes", "envelopes_refundleg", 3),
    ("envelopes", "0004_no_like_indexes", "envelopes_refundoperation", 1),
    ("verification", "0007_no_like_indexes", "verification_verificationrun", 1),
]


def _indexes(table: str) -> dict[str, str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = %s", [table])
        return dict(cursor.fetchall())


def test_the_refund_paths_tables_have_no_prefix_search_indexes_and_keep_their_unique_ones() -> None:
    for table in TABLES:
        indexes = _indexes(table)
        assert not [name for name in indexes if name.endswith("_like")], table
        assert any("public_id" in d and "UNIQUE" in d for d in indexes.values()), table
    legs = _indexes("envelopes_refundleg")
    assert any("idempotency_key" in d and "UNIQUE" in d for d in legs.values())
    assert any("provider_refund_id" in d for d in legs.values())  # looked up by events


@pytest.mark.parametrize(("app", "migration", "table", "count"), DROPPED)
def test_going_back_makes_the_dropped_indexes_again(
    app: str, migration: str, table: str, count: int
) -> None:
    executor = MigrationExecutor(connection)
    before = executor.loader.graph.node_map[(app, migration)].parents
    (previous,) = [node.key for node in before if node.key[0] == app]
    try:
        executor.migrate([previous])
        restored = [n for n, d in _indexes(table).items() if "varchar_pattern_ops" in d]
        assert len(restored) == count
    finally:
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(executor.loader.graph.leaf_nodes())
    assert not [n for n in _indexes(table) if n.endswith("_like")]
