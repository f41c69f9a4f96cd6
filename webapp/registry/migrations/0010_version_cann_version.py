# The CANN toolkit that built a version's artifact (finding 7 of "Ascend on first contact").

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("registry", "0009_target_choices_from_model_store"),
    ]

    operations = [
        migrations.AddField(
            model_name="version",
            name="cann_version",
            field=models.CharField(blank=True, max_length=64),
        ),
        migrations.AddField(
            model_name="version",
            name="cann_ops_version",
            field=models.CharField(blank=True, max_length=64),
        ),
    ]
