from django.db import migrations

from core.db import append_only


class Migration(migrations.Migration):
    dependencies = [("envelopes", "0001_initial")]

    operations = [append_only("envelopes_journalentry")]
