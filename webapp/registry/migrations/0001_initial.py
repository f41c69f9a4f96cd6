import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [migrations.swappable_dependency(settings.AUTH_USER_MODEL)]

    operations = [
        migrations.CreateModel(
            name="Model",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("name", models.CharField(max_length=64, unique=True)),
                (
                    "target",
                    models.CharField(
                        choices=[
                            ("onnxruntime", "CPU (ONNX Runtime)"),
                            ("npu_ge", "Ascend NPU, GE backend"),
                            ("acl", "Ascend NPU, precompiled OM (pyACL)"),
                        ],
                        default="onnxruntime",
                        max_length=20,
                    ),
                ),
                ("description", models.TextField(blank=True, max_length=2000)),
                ("created", models.DateTimeField(auto_now_add=True)),
                ("updated", models.DateTimeField(auto_now=True)),
                (
                    "created_by",
                    models.ForeignKey(
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={"ordering": ["name"]},
        ),
    ]
