"""Issue 27: the console's search box finds a person by e-mail in any case: an index on
UPPER(email), which `email__iexact` compares."""

import django.db.models.functions.text
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0001_initial"),
        ("auth", "0012_alter_user_first_name_max_length"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="user",
            index=models.Index(
                django.db.models.functions.text.Upper("email"), name="user_email_upper"
            ),
        ),
    ]
