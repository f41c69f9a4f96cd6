"""Config revisions: a packaged version's options changed, and what that means for the build.

A revision is a new version made from an existing one with some options changed. When every
changed option is one of the target's ``config_only_options`` (instances, batching, devices),
the built artifact is byte for byte what it would be again, so the revision reuses it and its
verification and only writes a new config.pbtxt; otherwise it is built and verified again from
the same source, and the plan says which changes made that necessary.

Changes are given as option names (``instance_count``, ``max_batch_size``, ...) or, for the
dynamic batcher, in the shape config.pbtxt uses: ``{"dynamic_batching": {"preferred_batch_size":
[4, 8], "max_queue_delay_microseconds": 500}}`` (``false`` turns it off), because that is how
people who tune Triton write it.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from model_store.config import render_pbtxt
from model_store.config_lint import lint
from model_store.onnx_info import OnnxInfo
from model_store.targets.base import Target
from model_store.targets.findings import Finding
from model_store.targets.options import InvalidOptions
from model_store.text import Said, as_json, say

#: The keys config.pbtxt's ``dynamic_batching`` block takes, and the option each sets.
_BATCHER_KEYS = {
    "preferred_batch_size": "preferred_batch_sizes",
    "max_queue_delay_microseconds": "max_queue_delay_us",
}


class NothingChanged(InvalidOptions):
    """The changes leave every option as it was: there is nothing to revise."""

    code = "no_change"


@dataclass
class RevisionPlan:
    """What a revision would be, before anything is written.

    Attributes:
        options: The revision's options, parsed and resolved against the model.
        changed: ``{option: [before, after]}`` for each option that differs.
        rebuild: The changed options that the artifact depends on (empty: reuse it).
        config_pbtxt: The revision's config.pbtxt.
        diff: Unified diff from the original's config to the revision's (both rendered for
            the same version number, so only real changes show).
        findings: The target's checks of the model with the new options.
        problems: What the config linter says about the new config.pbtxt.
    """

    options: dict[str, Any]
    changed: dict[str, list[Any]]
    rebuild: list[str]
    config_pbtxt: str
    diff: str
    findings: list[Finding] = field(default_factory=list)
    problems: list[Said] = field(default_factory=list)

    @property
    def reuses_artifact(self) -> bool:
        return not self.rebuild

    @property
    def ok(self) -> bool:
        """No error finding and no lint problem: the revision may be made."""
        return not self.problems and not any(f.level == "error" for f in self.findings)

    def to_dict(self) -> dict[str, Any]:
        return {
            "options": self.options,
            "changed": self.changed,
            "rebuild": self.rebuild,
            "reuses_artifact": self.reuses_artifact,
            "config_pbtxt": self.config_pbtxt,
            "diff": self.diff,
            "findings": [f.to_dict() for f in self.findings],
            "problems": as_json(self.problems),
            "ok": self.ok,
        }


def normalize_changes(raw: object) -> dict[str, Any]:
    """Changes as option names; the config-shaped ``dynamic_batching`` block is unfolded.

    Raises:
        InvalidOptions: Not an object, or a ``dynamic_batching`` block with unknown keys.
    """
    if not isinstance(raw, Mapping) or not raw:
        raise InvalidOptions(
            say('Send the options to change as a JSON object, e.g. {"instance_count": 2}.')
        )
    changes = {str(key): value for key, value in raw.items()}
    batcher = changes.get("dynamic_batching")
    if isinstance(batcher, Mapping):
        unknown = sorted(str(k) for k in batcher if k not in _BATCHER_KEYS)
        if unknown:
            raise InvalidOptions(
                say(
                    "Unknown key(s) in 'dynamic_batching': %(unknown)s. It takes "
                    "%(keys)s, or true/false.",
                    unknown=", ".join(unknown),
                    keys=" and ".join(_BATCHER_KEYS),
                )
            )
        changes["dynamic_batching"] = True
        for key, option in _BATCHER_KEYS.items():
            if key in batcher:
                changes[option] = batcher[key]
    return changes


def plan_revision(
    target: Target,
    *,
    name: str,
    number: int,
    original: Mapping[str, Any],
    changes: Mapping[str, Any],
    info: OnnxInfo,
    config_info: OnnxInfo | None = None,
) -> RevisionPlan:
    """The revision of a version with ``original`` options, to become version ``number``.

    Args:
        target: The model's target.
        name: The model's name.
        number: The revision's version number (written in config.pbtxt's version policy).
        original: The options of the version revised (as stored: parsed and resolved).
        changes: From :func:`normalize_changes`.
        info: The source model (options are resolved and checked against it).
        config_info: What the packaged artifact serves, when it is an ONNX file whose
            signature may differ from the source's; the source's info otherwise.

    Raises:
        InvalidOptions: A change is unknown or invalid for this target and model.
        NothingChanged: Every option stays as it was.
    """
    before = target.parse_options(original, info=info)
    merged = {**before, **changes}
    if changes.get("max_batch_size") == 0 and "dynamic_batching" not in changes:
        # No batching means no batcher: saying so twice should not be needed.
        merged["dynamic_batching"] = False
        merged["preferred_batch_sizes"] = []
    if "max_batch_size" in changes and "preferred_batch_sizes" not in changes:
        # Preferred sizes above a lowered maximum would be refused; keep the ones that fit.
        limit = merged.get("max_batch_size") or 0
        merged["preferred_batch_sizes"] = [
            s
            for s in merged.get("preferred_batch_sizes") or []
            if isinstance(s, int) and s <= limit
        ]
    if "preferred_batch_sizes" not in before:
        merged.pop("preferred_batch_sizes", None)
    after = target.parse_options(merged, info=info)
    changed = {
        key: [before.get(key), value] for key, value in after.items() if before.get(key) != value
    }
    if not changed:
        raise NothingChanged(say("Nothing would change: every option already has that value."))
    served = config_info or info
    config = target.make_config(name, served, after, number)
    text = render_pbtxt(config)
    was = render_pbtxt(target.make_config(name, served, before, number))
    diff = "".join(
        difflib.unified_diff(
            was.splitlines(keepends=True),
            text.splitlines(keepends=True),
            fromfile="config.pbtxt (now)",
            tofile="config.pbtxt (revision)",
        )
    )
    return RevisionPlan(
        options=after,
        changed=changed,
        rebuild=sorted(key for key in changed if key not in target.config_only_options),
        config_pbtxt=text,
        diff=diff,
        findings=target.check_model(info, after),
        problems=lint(config),
    )
