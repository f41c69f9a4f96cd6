from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("registry", "0015_job_texts"),
    ]

    operations = [
        migrations.AddField(
            model_name="nodeserving",
            name="texts",
            field=models.JSONField(blank=True, default=dict),
        ),
        migrations.AddField(
            model_name="reconcilereport",
            name="texts",
            field=models.JSONField(blank=True, default=dict),
        ),
    ]
