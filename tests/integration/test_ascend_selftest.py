"""``manage.py ascend_selftest`` end to end against the CANN stand-ins and a real Triton.

The command runs as a subprocess, as an operator runs it, so its exit status is the real one.
The host it sees is the fake toolkit (tests/fakes/toolkit.py: ``ASCEND_TOOLKIT_HOME`` and
``PATH`` only, as a sourced set_env.sh gives), and a ``tritonserver`` whose ``acl`` backend
finds the fake pyACL through the same ``ASCEND_TOOLKIT_HOME``. Everything but the NPU is real:
ATC's command line and environment, pyACL's calls, Triton, the trial loader.

ATC's Python: the self-test judges the interpreter ATC will run against CANN's documented
packages (docs/atc.md#python-environment). This virtualenv lacks two of them (decorator, scipy),
which ATC's operator compiler imports and this fake ATC never does, so the happy path gives ATC
an interpreter of its own: this one, with two empty stand-in modules on its path.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from model_store import spawn
from model_store.runtime.access import new_api_key
from model_store.runtime.client import TritonRuntime
from tests.fakes.npu_ge import STANDIN
from tests.fakes.toolkit import make_fake_toolkit
from tests.fixtures.triton import (
    mlp_config_pbtxt,
    mlp_onnx_bytes,
    started_triton,
    wait_for_state,
    write_model,
)

pytestmark = [pytest.mark.integration, pytest.mark.stack]

ROOT = Path(__file__).resolve().parents[2]
SERVING = "mlp_serving"


@dataclass
class SelftestHost:
    """A fake Ascend host with a running Triton and a model already serving."""

    root: Path
    store: Path
    toolkit: dict[str, str]
    atc_python: Path
    triton_env: dict[str, str]
    runtime: TritonRuntime


def _atc_python(folder: Path) -> Path:
    """A ``python3`` for ATC: this interpreter, plus empty ``decorator`` and ``scipy``."""
    stubs = folder / "stubs"
    (stubs / "scipy").mkdir(parents=True)
    (stubs / "decorator.py").write_text('__version__ = "5.1.1"\n')
    (stubs / "scipy" / "__init__.py").write_text('__version__ = "1.10.1"\n')
    python3 = folder / "bin" / "python3"
    python3.parent.mkdir(parents=True)
    python3.write_text(
        "#!/bin/sh\n"
        f'PYTHONPATH="{stubs}${{PYTHONPATH:+:$PYTHONPATH}}" exec "{sys.executable}" "$@"\n'
    )
    python3.chmod(0o755)
    return python3


def _tree_digest(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        digest.update(str(path.relative_to(folder)).encode())
        if path.is_file():
            digest.update(path.read_bytes())
    return digest.hexdigest()


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SelftestHost]:
    root = tmp_path_factory.mktemp("selftest")
    toolkit = make_fake_toolkit(root / "Ascend")
    store = root / "store"
    repository = store / "repository"
    write_model(repository, SERVING, {1: mlp_onnx_bytes()}, mlp_config_pbtxt(SERVING))
    key = new_api_key()
    # Triton's acl backend finds pyACL under ASCEND_TOOLKIT_HOME, as with a real toolkit.
    env = {"ASCEND_TOOLKIT_HOME": toolkit["ASCEND_TOOLKIT_HOME"]}
    with started_triton(
        root / "triton", repository, store / "backends", api_key=key, env=env
    ) as triton:
        runtime = triton.runtime()
        runtime.load(SERVING)
        wait_for_state(runtime, SERVING, "READY")
        triton_env = {
            "TRITON_URL": f"127.0.0.1:{triton.http_port}",
            "TRITON_GRPC_URL": f"127.0.0.1:{triton.grpc_port}",
            "TRITON_METRICS_URL": f"127.0.0.1:{triton.metrics_port}",
            "TRITON_API_KEY": key,
        }
        yield SelftestHost(root, store, toolkit, _atc_python(root / "atc-py"), triton_env, runtime)
        runtime.close()


def _run(
    tmp_path: Path, env: dict[str, str], *args: str, timeout: float = 240
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any] | None]:
    """``manage.py ascend_selftest --json FILE ARGS`` with ``env`` over a clean environment."""
    tmp_path.mkdir(exist_ok=True)
    report = tmp_path / "selftest.json"
    base = {k: v for k, v in os.environ.items() if not k.startswith(("ASCEND_", "ATC_", "FAKE_"))}
    # Its scratch directory goes under TMPDIR: an empty one shows that it removed it.
    (tmp_path / "tmp").mkdir()
    base.update({"HUB_VAR_DIR": str(tmp_path / "var"), "TMPDIR": str(tmp_path / "tmp"), **env})
    done = spawn.run(
        [sys.executable, str(ROOT / "manage.py"), "ascend_selftest", "--json", str(report), *args],
        env=base,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    data = json.loads(report.read_text()) if report.exists() else None
    return done, data


def _host_env(host: SelftestHost) -> dict[str, str]:
    return {
        **host.toolkit,
        **host.triton_env,
        "ATC_PYTHON": str(host.atc_python),
        "MODEL_STORE_ROOT": str(host.store),
        # Where the self-test looks for Triton's backends (npu_ge): this Triton's.
        "TRITON_HOME_PATH": str(host.store),
    }


@contextlib.contextmanager
def _own_triton(
    host: SelftestHost, tmp_path: Path, triton_env: dict[str, str], **extra: str
) -> Iterator[dict[str, str]]:
    """A Triton of the test's own on ``tmp_path/store`` with ``triton_env``; yields the
    self-test's environment pointed at it."""
    key = new_api_key()
    store = tmp_path / "store"
    with started_triton(
        tmp_path / "triton", store / "repository", store / "backends", api_key=key,
        env=triton_env,
    ) as triton:  # fmt: skip
        yield (
            _host_env(host)
            | extra
            | {
                "TRITON_URL": f"127.0.0.1:{triton.http_port}",
                "TRITON_GRPC_URL": f"127.0.0.1:{triton.grpc_port}",
                "TRITON_METRICS_URL": f"127.0.0.1:{triton.metrics_port}",
                "TRITON_API_KEY": key,
                "MODEL_STORE_ROOT": str(store),
                "TRITON_HOME_PATH": str(store),
            }
        )


def _verdicts(report: dict[str, Any]) -> dict[str, str]:
    return {stage["id"]: stage["verdict"] for stage in report["stages"]}


def test_every_stage_passes_on_the_fake_host_and_nothing_is_left_behind(
    host: SelftestHost, tmp_path: Path
) -> None:
    serving_dir = host.store / "repository" / SERVING
    before = _tree_digest(serving_dir)
    done, report = _run(tmp_path, _host_env(host))
    assert done.returncode == 0, done.stdout + done.stderr
    assert report is not None
    verdicts = _verdicts(report)
    assert verdicts == {
        "cann": "passed",
        "atc_python": "passed",
        "npus": "passed",
        "soc": "passed",
        "serving_side": "passed",
        "atc_compile": "passed",
        "pyacl": "passed",
        "triton_acl": "passed",
        "triton_npu_ge": "skipped",  # the serving Triton says it has no npu_ge
        "same_top1": "passed",
    }, done.stdout
    stages = {stage["id"]: stage for stage in report["stages"]}
    assert stages["triton_npu_ge"]["blocked_by"] is None
    assert "has no npu_ge backend" in stages["triton_npu_ge"]["summary"]
    # Asked from inside the Triton that serves, not read off the worker's disk.
    serving = stages["serving_side"]["evidence"]["serving"]
    assert serving["cann"]["version"] == "8.0.RC3" and serving["pyacl"]["soc"] == "Ascend310P3"
    assert serving["pyacl"]["device_count"] == 2 and "acl" in serving["backends"]

    # What an operator attaches to a bug: versions, SoC, ATC's command, the top-5 per path.
    assert report["verdict"] == "passed" and report["exit_status"] == 0
    versions = report["versions"]
    assert versions["cann"] == "8.0.RC3" and versions["npu_smi"] == "25.5.1"
    assert versions["atc_python"] == ".".join(map(str, sys.version_info[:3]))
    assert versions["triton"] and versions["hub"] == "0.1.0"
    assert report["soc"] == {"value": "Ascend310P3", "source": "npu-smi and pyACL, which agree"}
    assert report["devices_under_test"] == [0, 1]
    compile_ = stages["atc_compile"]["evidence"]
    assert "--soc_version=Ascend310P3" in compile_["command"]
    assert "--input_shape=input:1,3,224,224" in compile_["command"]
    assert any("ATC run success" in line for line in compile_["last_lines"])
    per_device = stages["pyacl"]["evidence"]["devices"]
    assert [d["device"] for d in per_device] == [0, 1]
    for entry in per_device:
        assert entry["top_k"][0]["label"] == "espresso" and len(entry["top_k"]) == 5
    served = stages["triton_acl"]["evidence"]
    assert served["trial_name"].startswith("_trial-ascend-selftest-acl-")
    assert served["top_k"][0]["label"] == "espresso"
    assert served["top_k"][0]["probability"] > 0.9
    assert set(stages["same_top1"]["evidence"]["top1"]) == {
        "pyACL, NPU 0",
        "pyACL, NPU 1",
        "Triton acl",
    }
    assert all(stage["seconds"] >= 0 for stage in report["stages"])

    # The console says the same, stage by stage.
    assert "PASSED    ATC compiles the demo model" in done.stdout
    assert "Ascend self-test PASSED: 9 passed, 1 not applicable here." in done.stdout

    # It never disturbed what serves, and removed everything it created.
    repository = host.store / "repository"
    assert sorted(p.name for p in repository.iterdir()) == [SERVING]
    assert _tree_digest(serving_dir) == before
    index = host.runtime.repository_index()
    assert [r["name"] for r in index if r["state"] == "READY"] == [SERVING]
    assert not [r for r in index if r["name"].startswith("_trial-") and r["state"] == "READY"]
    assert list((tmp_path / "tmp").glob("ascend-selftest-*")) == []
    print(done.stdout)


def test_one_device_and_a_device_that_does_not_exist(host: SelftestHost, tmp_path: Path) -> None:
    done, report = _run(tmp_path / "one", _host_env(host), "--device", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert report is not None and report["devices_under_test"] == [1]
    stages = {stage["id"]: stage for stage in report["stages"]}
    assert [d["device"] for d in stages["pyacl"]["evidence"]["devices"]] == [1]
    assert 'key: "device_id"' in stages["triton_acl"]["evidence"]["config_pbtxt"]
    assert 'string_value: "1"' in stages["triton_acl"]["evidence"]["config_pbtxt"]

    done, report = _run(tmp_path / "seven", _host_env(host), "--device", "7")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "--device 7 names no NPU of this host" in done.stderr
    assert "device(s) 0, 1" in done.stderr
    assert report is None  # a usage error, not a report about the host


def test_without_cann_the_first_stage_fails_and_says_what_to_install(tmp_path: Path) -> None:
    env = {"PATH": os.pathsep.join([str(Path(sys.executable).parent), "/usr/bin", "/bin"])}
    done, report = _run(tmp_path, {**env, "TRITON_URL": "127.0.0.1:1"})
    assert done.returncode == 1, done.stdout + done.stderr
    assert report is not None
    first, *rest = report["stages"]
    assert (first["id"], first["verdict"]) == ("cann", "failed")
    assert "ASCEND_TOOLKIT_HOME" in first["next_step"]
    by_id = {s["id"]: s for s in rest}
    # npu-smi needs only the driver (none here), and nothing answers at TRITON_URL.
    assert by_id.pop("npus")["verdict"] == "failed"
    assert by_id.pop("serving_side")["verdict"] == "failed"
    assert all(s["verdict"] == "skipped" and s["blocked_by"] for s in by_id.values())
    assert "Next step: Install the CANN toolkit" in done.stdout


def test_atc_refusing_its_python_is_a_failed_stage_with_the_next_step(
    tmp_path: Path,
) -> None:
    """A toolkit whose ATC finds Python 3.6: ATC stops with E40002 (docs/atc.md#error-codes)."""
    toolkit = make_fake_toolkit(tmp_path / "Ascend")
    old = tmp_path / "py36" / "bin" / "python3"
    old.parent.mkdir(parents=True)
    old.write_text('#!/bin/sh\n[ "$1" = "-V" ] && echo "Python 3.6.9" && exit 0\nexit 1\n')
    old.chmod(0o755)
    env = {**toolkit, "ATC_PYTHON": str(old), "TRITON_URL": "127.0.0.1:1"}
    done, report = _run(tmp_path, env)
    assert done.returncode == 1, done.stdout + done.stderr
    assert report is not None
    stages = {stage["id"]: stage for stage in report["stages"]}
    assert stages["cann"]["verdict"] == "passed"
    assert stages["atc_python"]["verdict"] == "failed"
    compile_ = stages["atc_compile"]
    assert compile_["verdict"] == "failed" and "E40002" in compile_["summary"]
    assert "ATC_PYTHON" in compile_["next_step"]
    assert compile_["evidence"]["error_codes"] == ["E40002"]
    assert "--soc_version=Ascend310P3" in compile_["evidence"]["command"]
    assert stages["pyacl"]["blocked_by"] == "atc_compile"
    assert "Next step: ATC's Python is not usable" in done.stdout


def test_npu_smi_and_pyacl_disagreeing_about_the_chip_is_refused(tmp_path: Path) -> None:
    toolkit = make_fake_toolkit(tmp_path / "Ascend")
    env = {**toolkit, "FAKE_ACL_SOC": "Ascend910B4", "TRITON_URL": "127.0.0.1:1"}
    done, report = _run(tmp_path, env)
    assert done.returncode == 1
    assert report is not None
    soc = next(s for s in report["stages"] if s["id"] == "soc")
    assert soc["verdict"] == "failed"
    assert (
        "npu-smi says the chip is 310P3 (Ascend310P3) but pyACL says Ascend910B4"
        in (soc["summary"])
    )
    assert next(s for s in report["stages"] if s["id"] == "atc_compile")["blocked_by"] == "soc"


def test_a_triton_with_an_older_cann_than_the_worker_fails_the_serving_stage(
    host: SelftestHost, tmp_path: Path
) -> None:
    """The compose shape (docs/ascend.md#the-serving-side): the worker builds with CANN 8.0.RC3,
    the Triton that loads the OMs has its own 8.0.RC1 beside it."""
    older = make_fake_toolkit(tmp_path / "triton-Ascend", version="8.0.RC1")
    with _own_triton(host, tmp_path, {"ASCEND_TOOLKIT_HOME": older["ASCEND_TOOLKIT_HOME"]}) as env:
        done, report = _run(tmp_path / "run", env, "--device", "0")
    assert done.returncode == 1 and report is not None
    stage = next(s for s in report["stages"] if s["id"] == "serving_side")
    assert stage["verdict"] == "failed", stage
    assert "builds with CANN 8.0.RC3 but Triton loads with CANN 8.0.RC1" in stage["summary"]


def test_npu_ge_is_tried_in_a_disposable_triton_never_in_the_one_that_serves(
    host: SelftestHost, tmp_path: Path
) -> None:
    """B3 of the review (docs/ascend.md): the serving Triton has npu_ge (the stand-in,
    tests/fakes/npu_ge); the self-test builds the demo for it and loads it into a Triton of its
    own on the same backends, which it stops afterwards."""
    (tmp_path / "store" / "backends" / "npu_ge").mkdir(parents=True)
    shutil.copy(STANDIN, tmp_path / "store" / "backends" / "npu_ge" / "model.py")
    (tmp_path / "ge-state").mkdir()
    state = {"FAKE_NPU_GE_STATE_DIR": str(tmp_path / "ge-state")}
    triton_env = {"ASCEND_TOOLKIT_HOME": host.toolkit["ASCEND_TOOLKIT_HOME"], **state}
    with _own_triton(host, tmp_path, triton_env, **state) as env:
        done, report = _run(tmp_path / "run", env, "--device", "0")
        runtime = TritonRuntime(env["TRITON_URL"], api_key=env["TRITON_API_KEY"])
        try:
            loaded = [r["name"] for r in runtime.repository_index()]
        finally:
            runtime.close()
    assert done.returncode == 0, done.stdout + done.stderr
    assert report is not None
    stage = next(s for s in report["stages"] if s["id"] == "triton_npu_ge")
    assert stage["verdict"] == "passed", stage
    assert stage["evidence"]["triton"] == "disposable"
    assert stage["evidence"]["top_k"][0]["label"] == "espresso"
    assert stage["evidence"]["triton_url"] != env["TRITON_URL"]
    assert not any("npu-ge" in name for name in loaded), loaded  # never in the serving one


def test_with_the_npu_left_to_triton_the_device_stages_run_inside_it(
    host: SelftestHost, tmp_path: Path
) -> None:
    """``WORKER_NPU=off``, as the Ascend compose files set it: the worker opens no device, so
    npu-smi's table, the SoC, pyACL's count and the OM on each NPU come from inside Triton
    (docs/ascend.md#one-container-owns-the-npu). The worker's own npu-smi is broken on purpose:
    it must not be asked."""
    # npu-smi on Triton's PATH (the stub's Python stays first, as the embedded Triton has it).
    path = os.pathsep.join([str(Path(sys.executable).parent), host.toolkit["PATH"]])
    triton_env = {"ASCEND_TOOLKIT_HOME": host.toolkit["ASCEND_TOOLKIT_HOME"], "PATH": path}
    worker = {"WORKER_NPU": "off", "FAKE_NPU_SMI_SAMPLE": str(tmp_path / "no-such-table")}
    with _own_triton(host, tmp_path, triton_env, **worker) as env:
        done, report = _run(tmp_path / "run", env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert report is not None
    verdicts = _verdicts(report)
    assert all(v == "passed" for k, v in verdicts.items() if k != "triton_npu_ge"), verdicts
    stages = {stage["id"]: stage for stage in report["stages"]}
    assert stages["npus"]["evidence"]["seen_in"] == "triton"
    assert "Read inside the Triton container" in stages["npus"]["summary"]
    assert report["soc"]["value"] == "Ascend310P3"
    pyacl = stages["pyacl"]["evidence"]
    assert pyacl["ran_in"] == "triton" and [d["device"] for d in pyacl["devices"]] == [0, 1]
    assert all(d["top_k"][0]["label"] == "espresso" for d in pyacl["devices"])
    assert "WORKER_NPU=off" in stages["pyacl"]["summary"]


def test_a_node_runs_the_same_selftest_without_django(host: SelftestHost, tmp_path: Path) -> None:
    """deploy/node/'s worker has no Django: ``python -m workers.node.selftest`` runs the same
    stages with the node's settings (its Triton, its store), the NPU left to its Triton."""
    path = os.pathsep.join([str(Path(sys.executable).parent), host.toolkit["PATH"]])
    triton_env = {"ASCEND_TOOLKIT_HOME": host.toolkit["ASCEND_TOOLKIT_HOME"], "PATH": path}
    with _own_triton(host, tmp_path, triton_env, WORKER_NPU="off") as env:
        node = {
            "NODE_NAME": "edge-1", "HUB_URL": "http://127.0.0.1:9", "NODE_TOKEN": "x" * 40,
            "REDIS_URL": "redis://127.0.0.1:9/0",
            "NODE_REPOSITORY": str(Path(env["MODEL_STORE_ROOT"]) / "repository"),
        }  # fmt: skip
        base = {k: v for k, v in os.environ.items() if not k.startswith(("ASCEND_", "FAKE_"))}
        report_path = tmp_path / "node-selftest.json"
        done = spawn.run(
            [sys.executable, "-m", "workers.node.selftest", "--json", str(report_path)],
            env={**base, **env, **node, "DJANGO_SETTINGS_MODULE": "no.such.module"},
            cwd=ROOT, capture_output=True, text=True, timeout=240, check=False,
        )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(report_path.read_text())
    verdicts = _verdicts(report)
    assert all(v == "passed" for k, v in verdicts.items() if k != "triton_npu_ge"), verdicts
    assert "Ascend self-test PASSED" in done.stdout
