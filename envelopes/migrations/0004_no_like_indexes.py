"""Issue 15: the refund path's tables keep no `_like` (varchar_pattern_ops) index beside their
unique and indexed CharFields: nothing searches them by prefix, and each was one more index entry
per refund leg and operation written (core.db.without_like_indexes)."""

from django.db import migrations

from core.db import without_like_indexes


class Migration(migrations.Migration):
    dependencies = [("envelopes", "0003_adjustments")]

    operations = [
        without_like_indexes(
            "envelopes.RefundLeg", "public_id", "idempotency_key", "provider_refund_id"
        ),
        without_like_indexes("envelopes.RefundOperation", "public_id"),
    ]
