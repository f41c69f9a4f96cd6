"""What a scan of an existing Triton repository found: models, versions, files, problems.

Plain data (JSON-able through ``to_dict``) shared by the scanner (:mod:`.scan`), the reading of
each model (:mod:`.understand`) and the plan (:mod:`.plan`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from model_store.text import Said, as_json

Level = Literal["error", "warning", "info"]


@dataclass(frozen=True)
class Problem:
    """One thing found about a model or version. ``error`` blocks adopting it.

    ``message`` is a :func:`~model_store.text.say` sentence, stored as a message.
    """

    level: Level
    code: str
    message: Said

    def to_dict(self) -> dict[str, Any]:
        return {"level": self.level, "code": self.code, "message": as_json(self.message)}


@dataclass(frozen=True)
class ScannedFile:
    """A file of a version directory: its path inside the version, size and SHA-256."""

    relpath: str
    size: int
    sha256: str


@dataclass
class ScannedVersion:
    """One numbered version directory."""

    number: int
    files: list[ScannedFile]
    problems: list[Problem] = field(default_factory=list)
    #: SHA-256 over the file list and the config: the same files give the same digest, so
    #: adopting again recognises what it copied before.
    digest: str = ""

    @property
    def adoptable(self) -> bool:
        return not any(p.level == "error" for p in self.problems)

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)

    def to_dict(self) -> dict[str, object]:
        return {
            "number": self.number,
            "files": [{"path": f.relpath, "size": f.size, "sha256": f.sha256} for f in self.files],
            "size": self.size,
            "digest": self.digest,
            "adoptable": self.adoptable,
            "problems": [p.to_dict() for p in self.problems],
        }


@dataclass
class ScannedModel:
    """A model directory and what the hub understood of it.

    Attributes:
        directory: The directory's name (Triton's model name).
        path: Its absolute path.
        config_text: The config.pbtxt the version would be packaged with (the team's own
            text for external models, the hub's rendering for ONNX ones), or "" if none.
        config_origin: ``"config.pbtxt"``, ``"generated"`` (ONNX without a config) or ``""``.
        backend: The backend or platform it names (``"python"``, ``"ensemble"``, ...).
        target: The hub target it would be adopted into, or "" when it cannot be.
        composes: For an ensemble, the models its steps call.
        limits: What the hub cannot do for it, in plain words.
    """

    directory: str
    path: Path
    config_text: str = ""
    config_origin: str = ""
    backend: str = ""
    target: str = ""
    versions: list[ScannedVersion] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    composes: list[str] = field(default_factory=list)
    limits: list[Said] = field(default_factory=list)
    signature: dict[str, object] = field(default_factory=dict)

    @property
    def adoptable(self) -> bool:
        return (
            bool(self.target)
            and not any(p.level == "error" for p in self.problems)
            and any(v.adoptable for v in self.versions)
        )

    def to_dict(self) -> dict[str, object]:
        return {
            "directory": self.directory,
            "path": str(self.path),
            "backend": self.backend,
            "target": self.target,
            "config_origin": self.config_origin,
            "config": self.config_text,
            "versions": [v.to_dict() for v in self.versions],
            "problems": [p.to_dict() for p in self.problems],
            "composes": self.composes,
            "limits": as_json(self.limits),
            "adoptable": self.adoptable,
        }


@dataclass
class RepositoryScan:
    """Every model directory found under ``root``."""

    root: Path
    models: list[ScannedModel]
    problems: list[Problem] = field(default_factory=list)

    def model(self, directory: str) -> ScannedModel | None:
        return next((m for m in self.models if m.directory == directory), None)

    def to_dict(self) -> dict[str, object]:
        return {
            "root": str(self.root),
            "models": [m.to_dict() for m in self.models],
            "problems": [p.to_dict() for p in self.problems],
        }
