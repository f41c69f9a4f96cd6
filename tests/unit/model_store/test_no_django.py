"""model_store is plain Python: importing any of its modules pulls in neither Django nor the
layers above it (webapp, workers)."""

from __future__ import annotations

import sys
from pathlib import Path

from model_store import spawn

PACKAGE = Path(__file__).resolve().parents[3] / "model_store"
#: Triton's Python backend loads these alone, with its own `triton_python_backend_utils`.
LOADED_BY_TRITON = {
    "model_store.backends.onnxruntime.model",
    "model_store.backends.acl.model",
    "model_store.serving.facts_probe.model",
}


def _every_module() -> list[str]:
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        if name not in LOADED_BY_TRITON:
            names.append(name)
    return names


def test_every_module_imports_without_django_webapp_or_workers() -> None:
    modules = _every_module()
    assert len(modules) > 40  # the walk found the package
    imports = "; ".join(f"import {name}" for name in modules)
    check = (
        "import sys; above = sorted({m.split('.')[0] for m in sys.modules} & "
        "{'django', 'webapp', 'workers'}); assert not above, above"
    )
    result = spawn.run(
        [sys.executable, "-c", f"{imports}; {check}"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=PACKAGE.parent,
    )
    assert result.returncode == 0, result.stderr[-2000:]
