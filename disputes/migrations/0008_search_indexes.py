"""Issue 27: the console's search box finds a dispute by the provider's id alone (the unique
constraint leads with `provider`)."""

from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("disputes", "0007_dispute_submission_method_pending"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddIndex(
            model_name="dispute",
            index=models.Index(fields=["provider_dispute_id"], name="dispute_provider_id"),
        ),
    ]
