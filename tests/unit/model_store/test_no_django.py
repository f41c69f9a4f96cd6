"""model_store is plain Python: importing its core must not pull in Django."""

from __future__ import annotations

import sys

from model_store import spawn

CORE_MODULES = ["errors", "names", "dtypes", "store", "config", "onnx_info", "uploads"]


def test_the_core_modules_import_without_django() -> None:
    imports = "; ".join(f"import model_store.{name}" for name in CORE_MODULES)
    check = "import sys; assert not any(m.split('.')[0] == 'django' for m in sys.modules), 'django'"
    result = spawn.run(
        [sys.executable, "-c", f"{imports}; {check}"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
