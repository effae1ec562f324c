"""Issue 27: the console's search box finds the discrepancies about any id (their subject) and
of an envelope, each by an exact match."""

from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("envelopes", "0006_search_indexes"),
        ("reconciliation", "0004_due_runs_funding_unrecorded"),
        ("verification", "0009_search_indexes"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddIndex(
            model_name="discrepancy",
            index=models.Index(fields=["subject_id"], name="discrepancy_subject"),
        ),
        migrations.AddIndex(
            model_name="discrepancy",
            index=models.Index(
                condition=models.Q(("envelope_public_id", ""), _negated=True),
                fields=["envelope_public_id"],
                name="discrepancy_envelope",
            ),
        ),
    ]
