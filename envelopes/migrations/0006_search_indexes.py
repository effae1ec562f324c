"""Issue 27: the console's search box finds a funding leg by its PaymentIntent and an adjustment
by the provider object it names (rejected ones too), each by an exact match on a plain btree
(no `_like` index: nothing searches them by prefix)."""

from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("envelopes", "0005_provider_reads_and_foreign_releases"),
        ("verification", "0009_search_indexes"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddIndex(
            model_name="adjustment",
            index=models.Index(
                condition=models.Q(("provider_object_id", ""), _negated=True),
                fields=["provider_object_id"],
                name="adjustment_provider_object",
            ),
        ),
        migrations.AddIndex(
            model_name="fundingleg",
            index=models.Index(
                condition=models.Q(("payment_intent_id", ""), _negated=True),
                fields=["payment_intent_id"],
                name="funding_payment_intent",
            ),
        ),
    ]
