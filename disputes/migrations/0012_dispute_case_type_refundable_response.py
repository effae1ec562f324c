"""A dispute as Stripe shows it: the card network's case type, whether its charge may still be
refunded, and whether a response is allowed at all. Stripe's `evidence_details.due_by` of 0 means
the network allows none; it was read before as a deadline of 1970-01-01 00:00:00 UTC, so a
provider dispute recorded with that deadline allows no response and has no deadline."""

from datetime import UTC, datetime
from typing import Any

from django.db import migrations, models

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def epoch_deadlines_allow_no_response(apps: Any, schema_editor: Any) -> None:
    Dispute = apps.get_model("disputes", "Dispute")
    Dispute.objects.filter(source="provider", response_deadline=EPOCH).update(
        response_allowed=False, response_deadline=None
    )


class Migration(migrations.Migration):
    dependencies = [
        ("disputes", "0011_reminder_window_appeal"),
    ]

    operations = [
        migrations.AddField(
            model_name="dispute",
            name="case_type",
            field=models.CharField(blank=True, max_length=20),
        ),
        migrations.AddField(
            model_name="dispute",
            name="is_charge_refundable",
            field=models.BooleanField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="dispute",
            name="response_allowed",
            field=models.BooleanField(default=True),
        ),
        migrations.RunPython(epoch_deadlines_allow_no_response, migrations.RunPython.noop),
    ]
