"""What a registry model's target and tags may be: the target choices (built from
``model_store.targets``), the default target, and the tag pattern and limits.

Apart from webapp/registry/models.py, which holds the models alone: these are plain values that
the models' fields, the forms, the actions and the API's types check against.
"""

from __future__ import annotations

from django.db import models
from django.utils.functional import lazy

from model_store.targets import all_targets
from webapp.text import localize

_said_lazily = lazy(localize, str)  # a choice's label, said when a page shows it

#: Where a model's versions are built to run: the targets of ``model_store.targets``, with
#: their labels, in their order (the CPU default first). Built from there so that a new target
#: is one new module; the column keeps no choices, so adding one needs no migration.
Target = models.TextChoices(  # type: ignore[call-overload]
    "Target", [(t.name.upper(), (t.name, _said_lazily(t.label))) for t in all_targets()]
)
DEFAULT_TARGET = all_targets()[0].name

#: What a tag may look like: free labels such as ``team:vision`` or ``stage:prod``.
TAG_PATTERN = r"^[a-z0-9][a-z0-9._:/-]*$"
TAG_MAX_LENGTH = 40
MAX_TAGS_PER_MODEL = 20
