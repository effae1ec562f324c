"""A dispute whose setting to `manual` (the Smart Disputes guard) has no answer yet is retried by
the resume job. Disputes entered by staff before this that the provider never answered `manual`
for are asked again once (a refusal ends it)."""

from typing import Any

from django.db import migrations, models


def staff_entries_pending(apps: Any, schema_editor: Any) -> None:
    Dispute = apps.get_model("disputes", "Dispute")
    Dispute.objects.filter(source="staff").exclude(intended_submission_method="manual").update(
        submission_method_pending=True
    )


class Migration(migrations.Migration):
    dependencies = [
        ("disputes", "0006_evidence_files_and_reminders"),
    ]

    operations = [
        migrations.AddField(
            model_name="dispute",
            name="submission_method_pending",
            field=models.BooleanField(default=False),
        ),
        migrations.RunPython(staff_entries_pending, migrations.RunPython.noop),
    ]
