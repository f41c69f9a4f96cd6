"""A job's steps: their names, the labels a page shows for them, and how a stored step reads.

Kept apart from the jobs' bookkeeping (webapp/registry/jobs/record.py), which needs the
models, so that the models can show their steps without importing it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.utils.translation import gettext, gettext_noop

from webapp.text import localize

COMPILE_STEPS = ("validate", "compile", "verify", "package")
#: Each step's label, stored in English with the job (``steps[i]["label"]``) and said in the
#: reader's language when shown (:func:`shown_step`): marked for the catalogue here, translated
#: at display time, so a job started from a Chinese page still stores English.
STEP_LABELS = {
    "validate": gettext_noop("Validate the ONNX model"),
    "compile": gettext_noop("Compile for the target"),
    "verify": gettext_noop("Verify against the source"),
    "reuse": gettext_noop("Reuse the built artifact"),
    "package": gettext_noop("Package the Triton version"),
    "prepare": gettext_noop("Prepare the inputs"),
    "sweep": gettext_noop("Drive the model at rising concurrency"),
    "record": gettext_noop("Record the results"),
    "search": gettext_noop("Try configs as temporary models"),
}
#: Steps whose label is their name (a serving job's one step, an adopt job's): the name is
#: the English label; these are its translations.
NAMED_STEPS = {
    "copy": gettext_noop("copy"),
    "verify": gettext_noop("verify"),
    "package": gettext_noop("package"),
    "serve": gettext_noop("serve"),
    "rollback": gettext_noop("rollback"),
    "load": gettext_noop("load"),
    "unload": gettext_noop("unload"),
    "retire": gettext_noop("retire"),
    "place": gettext_noop("place"),
}
SWEEP_STEPS = ("prepare", "sweep", "record")
TUNE_STEPS = ("prepare", "search", "record")


def initial_steps(names: tuple[str, ...]) -> list[dict[str, Any]]:
    return [
        {"name": n, "label": STEP_LABELS.get(n, n), "state": "pending", "message": ""}
        for n in names
    ]


def shown_step(step: Mapping[str, Any]) -> dict[str, Any]:
    """A stored step as a page shows it: its label and message in the active language (its
    state word is the page's ``state_label``).

    A label is translated when it is the one this hub stores for the step's name (a job made
    before a label changed keeps its own words); the message is said from its template.
    """
    name, label = step.get("name"), str(step.get("label") or step.get("name") or "")
    known = (STEP_LABELS.get(str(name)), NAMED_STEPS.get(str(name)))
    return {
        **step,
        "label": gettext(label) if label in known else label,
        "message": localize(step.get("message")),
    }
