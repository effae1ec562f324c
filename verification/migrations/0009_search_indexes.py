"""Issue 27: the console's search box finds every escalation about a subject (resolved ones
too), and the provider events about an object: its id, charge or PaymentIntent in the event's
`data.object`, each an expression index the search's lookup matches exactly."""

import django.db.models.fields.json
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("verification", "0008_escalation_resolution_cleared"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddIndex(
            model_name="escalation",
            index=models.Index(
                condition=models.Q(("subject_id", ""), _negated=True),
                fields=["subject_id"],
                name="escalation_subject",
            ),
        ),
        migrations.AddIndex(
            model_name="providerevent",
            index=models.Index(
                django.db.models.fields.json.KeyTextTransform(
                    "id",
                    django.db.models.fields.json.KeyTextTransform(
                        "object", django.db.models.fields.json.KeyTextTransform("data", "payload")
                    ),
                ),
                name="event_object_id",
            ),
        ),
        migrations.AddIndex(
            model_name="providerevent",
            index=models.Index(
                django.db.models.fields.json.KeyTextTransform(
                    "charge",
                    django.db.models.fields.json.KeyTextTransform(
                        "object", django.db.models.fields.json.KeyTextTransform("data", "payload")
                    ),
                ),
                name="event_object_charge",
            ),
        ),
        migrations.AddIndex(
            model_name="providerevent",
            index=models.Index(
                django.db.models.fields.json.KeyTextTransform(
                    "payment_intent",
                    django.db.models.fields.json.KeyTextTransform(
                        "object", django.db.models.fields.json.KeyTextTransform("data", "payload")
                    ),
                ),
                name="event_object_payment_intent",
            ),
        ),
    ]
