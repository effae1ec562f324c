"""Issue 15: a verification run keeps no `_like` (varchar_pattern_ops) index beside its unique
public id: nothing searches it by prefix, and one is started per accepted refund leg
(core.db.without_like_indexes)."""

from django.db import migrations

from core.db import without_like_indexes


class Migration(migrations.Migration):
    dependencies = [("verification", "0006_redundant_indexes")]

    operations = [without_like_indexes("verification.VerificationRun", "public_id")]
