"""Messages are stored once: as their template and values, in the field that shows them.

Before, a record kept a sentence twice: its English in the field (``Job.error``, ``Event.message``,
a finding's ``message``) and its template beside it under an extra key (a column, or a key of a
JSON record; :data:`OLD_KEY`). This migration folds each kept template into the field it
described, in the format of ``model_store.text.Message.to_json`` (``{"template", "params",
"plural"?, "count"?}``), turns the text columns that hold sentences into JSON columns, and drops
the extra key. A sentence stored without a template (plain words) stays the string it was.

The folding code is kept here, frozen, rather than imported from the application: it describes
the old format, which the application no longer knows. webapp/ops/migrations/0005 uses it too.
"""

from __future__ import annotations

import re
from typing import Any

from django.db import migrations, models

import webapp.text

OLD_KEY = "texts"


def message_from_old(stored: Any) -> Any:
    """An old stored template (``{"text", "template", "params", ...}``, nested ones wrapped in
    ``{"__text__": ...}``) in the new format; anything else as it is."""
    if not (isinstance(stored, dict) and isinstance(stored.get("template"), str)):
        return stored
    params = stored.get("params") if isinstance(stored.get("params"), dict) else {}
    new: dict[str, Any] = {
        "template": stored["template"],
        "params": {
            key: message_from_old(value["__text__"])
            if isinstance(value, dict) and "__text__" in value
            else value
            for key, value in params.items()
        },
    }
    if isinstance(stored.get("plural"), str):
        new["plural"] = stored["plural"]
        new["count"] = stored.get("count", 1)
    return new


def fold(record: Any) -> Any:
    """``record`` (at any depth) with every kept template put in the field it describes."""
    if isinstance(record, list):
        return [fold(item) for item in record]
    if not isinstance(record, dict):
        return record
    kept = record.get(OLD_KEY)
    out = {key: fold(value) for key, value in record.items() if key != OLD_KEY}
    if not isinstance(kept, dict):
        return out
    for key, stored in kept.items():
        plain = out.get(key)
        if isinstance(stored, list) and isinstance(plain, list) and len(stored) == len(plain):
            out[key] = [
                message_from_old(item) if isinstance(item, dict) else plain[i]
                for i, item in enumerate(stored)
            ]
        elif isinstance(stored, dict) and key in out and isinstance(plain, str):
            out[key] = message_from_old(stored)
    return out


def sentence(english: str, stored: Any) -> Any:
    """A column's sentence: its kept template when there is one (and it was not cleared)."""
    return message_from_old(stored) if english and isinstance(stored, dict) else english


def english(value: Any) -> Any:
    """The reverse: a message as the English it says; records at any depth; words as they are."""
    if isinstance(value, list):
        return [english(item) for item in value]
    if not isinstance(value, dict):
        return value
    if isinstance(value.get("template"), str) and set(value) <= {
        "template",
        "params",
        "plural",
        "count",
    }:
        plural, count = value.get("plural"), value.get("count", 1)
        chosen = plural if isinstance(plural, str) and count != 1 else value["template"]
        params = {key: english(item) for key, item in (value.get("params") or {}).items()}
        try:
            return chosen % params if params else chosen
        except (KeyError, ValueError, TypeError):
            return value["template"]
    return {key: english(item) for key, item in value.items()}


def forward(apps: Any, schema_editor: Any) -> None:
    Job = apps.get_model("registry", "Job")
    Version = apps.get_model("registry", "Version")
    NodeServing = apps.get_model("registry", "NodeServing")
    Event = apps.get_model("registry", "Event")
    ReconcileReport = apps.get_model("registry", "ReconcileReport")
    PerfRun = apps.get_model("registry", "PerfRun")
    TuningRun = apps.get_model("registry", "TuningRun")

    for job in Job.objects.all().iterator():
        job.error_said = sentence(job.error, (getattr(job, OLD_KEY) or {}).get("error"))
        job.steps = fold(job.steps)
        job.save(update_fields=["error_said", "steps"])
    for version in Version.objects.all().iterator():
        # A version's error is its failed build's: the job kept the template, not the version.
        said: Any = version.error
        if version.error:
            job = (
                Job.objects.filter(version=version, kind__in=("compile", "adopt"))
                .filter(error=version.error)
                .order_by("-created")
                .first()
            )
            if job is not None:
                said = sentence(version.error, (getattr(job, OLD_KEY) or {}).get("error"))
        version.error_said = said
        version.findings = fold(version.findings)
        version.verification = fold(version.verification)
        version.save(update_fields=["error_said", "findings", "verification"])
    for row in NodeServing.objects.all().iterator():
        row.error_said = sentence(row.error, (getattr(row, OLD_KEY) or {}).get("error"))
        row.save(update_fields=["error_said"])
    for event in Event.objects.all().iterator():
        data = event.data if isinstance(event.data, dict) else {}
        kept = data.get(OLD_KEY) if isinstance(data.get(OLD_KEY), dict) else {}
        event.message_said = sentence(event.message, kept.get("message"))
        event.data = fold(data)
        event.save(update_fields=["message_said", "data"])
    for report in ReconcileReport.objects.all().iterator():
        folded = fold(
            {"repairs": report.repairs, "warnings": report.warnings, OLD_KEY: getattr(report, OLD_KEY)}
        )
        report.repairs, report.warnings = folded["repairs"], folded["warnings"]
        report.save(update_fields=["repairs", "warnings"])
    for run in PerfRun.objects.all().iterator():
        run.plan, run.levels = fold(run.plan), fold(run.levels)
        run.save(update_fields=["plan", "levels"])
    for tuning in TuningRun.objects.all().iterator():
        tuning.trials = fold(tuning.trials)
        tuning.save(update_fields=["trials"])


def backward(apps: Any, schema_editor: Any) -> None:
    """Back to English text: the templates are not put back (the older code shows English)."""
    for name, fields, said in (
        ("Job", ["steps"], "error"),
        ("Version", ["findings", "verification"], "error"),
        ("NodeServing", [], "error"),
        ("Event", ["data"], "message"),
        ("ReconcileReport", ["repairs", "warnings"], None),
        ("PerfRun", ["plan", "levels"], None),
        ("TuningRun", ["trials"], None),
    ):
        Model = apps.get_model("registry", name)
        for row in Model.objects.all().iterator():
            for field in fields:
                setattr(row, field, english(getattr(row, field)))
            if said is not None:
                kept = getattr(row, f"{said}_said")  # a Message, or words
                setattr(row, said, str(kept) if kept is not None else "")
            Model.objects.filter(pk=row.pk).update(
                **{f: getattr(row, f) for f in [*fields, *([said] if said else [])]}
            )


# The old English, recognised again: only Node.refused_reason kept no template (ops 0005).
_PLACEHOLDER = re.compile(r"%\((\w+)\)s")


def message_from_english(english_text: str, templates: tuple[str, ...]) -> Any:
    """The message among ``templates`` that says ``english_text``, or the text as it is."""
    for template in templates:
        pattern = re.escape(template)
        for name in _PLACEHOLDER.findall(template):
            pattern = pattern.replace(re.escape(f"%({name})s"), f"(?P<{name}>.+?)", 1)
        found = re.fullmatch(pattern, english_text, re.DOTALL)
        if found is not None and template % found.groupdict() == english_text:
            return {"template": template, "params": found.groupdict()}
    return english_text


def _encoded(**kwargs: Any) -> models.JSONField:
    return models.JSONField(encoder=webapp.text.MessageEncoder, **kwargs)


class Migration(migrations.Migration):
    dependencies = [
        ("registry", "0016_reconcile_node_texts"),
    ]

    operations = [
        migrations.AddField("job", "error_said", webapp.text.MessageField()),
        migrations.AddField("version", "error_said", webapp.text.MessageField()),
        migrations.AddField("nodeserving", "error_said", webapp.text.MessageField()),
        migrations.AddField("event", "message_said", webapp.text.MessageField(blank=False)),
        migrations.AlterField("job", "steps", _encoded(default=list, blank=True)),
        migrations.AlterField("job", "params", _encoded(default=dict, blank=True)),
        migrations.AlterField("version", "findings", _encoded(default=list, blank=True)),
        migrations.AlterField("version", "verification", _encoded(null=True, blank=True)),
        migrations.AlterField("event", "data", _encoded(default=dict, blank=True)),
        migrations.AlterField("reconcilereport", "repairs", _encoded(default=list, blank=True)),
        migrations.AlterField("reconcilereport", "warnings", _encoded(default=list, blank=True)),
        migrations.AlterField("perfrun", "plan", _encoded(default=dict, blank=True)),
        migrations.AlterField("perfrun", "levels", _encoded(default=list, blank=True)),
        migrations.AlterField("tuningrun", "trials", _encoded(default=list, blank=True)),
        migrations.RunPython(forward, backward, elidable=False),
        # So that going back re-adds the column to existing rows (with "", then the English).
        migrations.AlterField("event", "message", models.TextField(default="")),
        migrations.RemoveField("job", "error"),
        migrations.RemoveField("job", OLD_KEY),
        migrations.RemoveField("version", "error"),
        migrations.RemoveField("nodeserving", "error"),
        migrations.RemoveField("nodeserving", OLD_KEY),
        migrations.RemoveField("event", "message"),
        migrations.RemoveField("reconcilereport", OLD_KEY),
        migrations.RenameField("job", "error_said", "error"),
        migrations.RenameField("version", "error_said", "error"),
        migrations.RenameField("nodeserving", "error_said", "error"),
        migrations.RenameField("event", "message_said", "message"),
    ]
