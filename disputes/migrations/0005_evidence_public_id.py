"""Evidence gets a public id (`evd_…`), so an idempotency record can name the admission it made.
Existing rows get one each (a unique field with a callable default needs three steps)."""

import secrets

from django.db import migrations, models

import disputes.models


def fill(apps, schema_editor):  # type: ignore[no-untyped-def]
    Evidence = apps.get_model("disputes", "Evidence")
    for row in Evidence.objects.filter(public_id__isnull=True).only("pk"):
        row.public_id = f"evd_{secrets.token_hex(12)}"
        row.save(update_fields=["public_id"])


class Migration(migrations.Migration):
    dependencies = [
        ("disputes", "0004_dispute_intended_submission_method"),
    ]

    operations = [
        migrations.AddField(
            model_name="evidence",
            name="public_id",
            field=models.CharField(max_length=40, null=True),
        ),
        migrations.RunPython(fill, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="evidence",
            name="public_id",
            field=models.CharField(
                default=disputes.models._evidence_public_id, max_length=40, unique=True
            ),
        ),
    ]
