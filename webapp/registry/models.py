from __future__ import annotations

from django.conf import settings
from django.db import models


class Target(models.TextChoices):
    """Where a model's versions are built to run (ARCHITECTURE.md, "Deployment targets")."""

    ONNXRUNTIME = "onnxruntime", "CPU (ONNX Runtime)"
    NPU_GE = "npu_ge", "Ascend NPU, GE backend"
    ACL = "acl", "Ascend NPU, precompiled OM (pyACL)"


class Model(models.Model):
    """A named model in the Triton repository; its name is its Triton name."""

    name = models.CharField(max_length=64, unique=True)
    target = models.CharField(max_length=20, choices=Target.choices, default=Target.ONNXRUNTIME)
    description = models.TextField(blank=True, max_length=2000)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "target": self.target,
            "description": self.description,
            "created": self.created.isoformat(),
            "created_by": self.created_by.get_username() if self.created_by else None,
            "serving_version": None,
            "versions": [],
        }
