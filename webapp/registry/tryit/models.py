from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models

from webapp.registry.catalogue.models import Model


class TryExample(models.Model):
    """A saved "Try it" request (inputs as the infer API takes them), one click to rerun."""

    model = models.ForeignKey(Model, on_delete=models.CASCADE, related_name="examples")
    name = models.CharField(max_length=80)
    inputs = models.JSONField()
    #: Bytes of the request that saved it: the per-model budget adds these up.
    size = models.PositiveIntegerField(default=0)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"{self.model.name}: {self.name}"

    def to_dict(self, *, inputs: bool = True) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": self.pk,
            "name": self.name,
            "created": self.created.isoformat(),
            "created_by": self.created_by.get_username() if self.created_by else None,
        }
        if inputs:
            data["inputs"] = self.inputs
        return data
