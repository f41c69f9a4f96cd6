from __future__ import annotations

import math

from django import template
from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _

from webapp.accounts.roles import role_display
from webapp.registry.jobs.models import Job

register = template.Library()

#: The states pages show as words (jobs, job steps, versions, Triton's model states, nodes,
#: a model on a node, tuning trials, findings and advice), keyed by the lower-case code.
#: The English is the code itself, so an English page reads as it did before translation.
STATE_LABELS: dict[str, Promise] = {
    # jobs, their steps and versions (Job.State, Version.Status, the steps' "state")
    "pending": _("pending"),
    "queued": _("queued"),
    "running": _("running"),
    "done": _("done"),
    "succeeded": _("succeeded"),
    "failed": _("failed"),
    "cancelled": _("cancelled"),
    "validating": _("validating"),
    "compiling": _("compiling"),
    "verifying": _("verifying"),
    "packaging": _("packaging"),
    # Triton's state of a model (webapp/registry/serving/state.py)
    "ready": _("ready"),
    "loading": _("loading"),
    "unloading": _("unloading"),
    "unavailable": _("unavailable"),
    "not loaded": _("not loaded"),
    "not served": _("not served"),
    "unknown": _("unknown"),
    # nodes, and a model on a node (webapp/nodes/summaries.py, webapp/registry/serving/rollout.py)
    "up": _("up"),
    "down": _("down"),
    "draining": _("draining"),
    "placing": _("placing"),
    "serving": _("serving"),
    "empty": _("empty"),
    # tuning trials (model_store/perf/tune.py)
    "measured": _("measured"),
    "skipped": _("skipped"),
    # findings, advice and a step that finished with a warning
    "error": _("error"),
    "warning": _("warning"),
    "info": _("info"),
    "ok": _("ok"),
    # A verification's status, as events and the switch summary name it.
    "passed": _("passed"),
    "not_run": _("not run"),
    "not run": _("not run"),
    "adopted": _("adopted"),
    "overridden": _("overridden"),
}


@register.filter
def sig(value: object, digits: int = 3) -> str:
    """A number with ``digits`` significant digits (errors span 1e-9 to 1e3)."""
    if value is None or value == "":
        return "-"
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return str(value)
    if math.isnan(number) or math.isinf(number):
        return str(number)
    return f"{number:.{int(digits)}g}"


@register.filter
def duration(seconds: object) -> str:
    """``3.2`` -> ``3.2 s``; ``95`` -> ``1 min 35 s``."""
    if seconds is None:
        return "-"
    value = float(seconds)  # type: ignore[arg-type]
    if value < 60:
        return f"{value:.1f} s"
    minutes, rest = divmod(round(value), 60)
    return f"{minutes} min {rest} s"


@register.filter
def state_label(value: object) -> str:
    """``{{ job.state|state_label }}``: a state code in the page's language.

    Keeps the code's case (``READY`` gives ``READY`` in English), so ``|upper`` and the
    upper-case codes of Triton read as before; a code not in :data:`STATE_LABELS` is shown as
    it is.
    """
    if value is None or value == "":
        return ""
    code = str(value)
    label = STATE_LABELS.get(code.lower())
    if label is None:
        return code
    said = str(label)
    return said.upper() if code.isupper() else said


@register.filter
def kind_word(value: object) -> str:
    """``{{ job.kind|kind_word }}``: a job kind as a word in a sentence ("roll back job"), from
    the model's choices (as the actions' refusals say it); an unknown kind as it is."""
    code = "" if value is None else str(value)
    try:
        return str(Job.Kind(code).label).lower()
    except ValueError:
        return code


@register.filter
def role_label(value: object) -> str:
    """``{{ token.scope|role_label }}``: a role code (viewer, operator, admin) in the page's
    language; a node token's ``node:<name>`` scope and an empty scope as they are."""
    return str(role_display("" if value is None else str(value)))


@register.filter
def ms(value: object) -> str:
    """``8.64`` -> ``8.6 ms``; none yet -> ``-``."""
    if value is None or value == "":
        return "-"
    return f"{float(value):.1f} ms"  # type: ignore[arg-type]


@register.filter
def percent(value: object) -> str:
    """A fraction as a percentage: ``0.015`` -> ``1.5%``."""
    if value is None or value == "":
        return "-"
    return f"{float(value) * 100:.3g}%"  # type: ignore[arg-type]


VERDICTS = {
    "pass": _("passed"),
    "fail": _("failed"),
    "extend": _("step extended"),
    "wait": _("waiting"),
}


@register.filter
def verdict_label(value: object) -> str:
    """A canary decision's verdict in the page's language."""
    code = "" if value is None else str(value)
    return str(VERDICTS.get(code, code))
