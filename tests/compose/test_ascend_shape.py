"""The Ascend shape (docker-compose.yml + deploy/hub-ascend.yml) with the CANN stand-ins.

As on an Atlas host, but every Ascend part is a stand-in (docs/deploy.md#the-ascend-shape):

- device nodes made with mknod (char 1:3, like /dev/null), owned by a "driver" group, 0660, in
  a folder given as ASCEND_DEV_DIR/ASCEND_DEVICE: they keep owner and mode in the containers,
  so the worker's user (uid 10001) opens them only through ``group_add``;
- the stand-in CANN tree (tests/fakes/toolkit.py, copied so it works mounted) where
  ASCEND_ROOT says, with the driver's npu-smi (a stand-in) at NPU_SMI_PATH;
- the Triton container is the Ascend-shaped image of ``make compose-images``: its own stand-in
  CANN, pyACL and an npu_ge backend stand-in.

Without ASCEND_DRIVER_GID compose refuses with the way to find it; with a wrong one the worker
stops at start (exit 78) and says the same; with the right one a model compiled for the
stand-in SoC verifies through pyACL in the worker, serves through the Triton container's acl
backend, classifies the coffee photo, and ``ascend_selftest`` in the worker passes.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.compose.conftest import (
    DEMO,
    DRIVER_GID,
    Api,
    Stack,
    builder,
    operator_token,
    project_name,
    shared_tmp,
    stack_settings,
    wait_for,
)
from tests.fixtures.multipart import multipart_file

# A cold image build (about 150 s) and a stack start count towards the first test.
pytestmark = [pytest.mark.integration, pytest.mark.compose, pytest.mark.timeout(900)]

FILES = ["docker-compose.yml", "deploy/hub-ascend.yml"]
HOW_TO_FIND = "stat -c %g /dev/davinci_manager"


def _stack(images: dict[str, str], host: dict[str, str], kind: str, **extra: str) -> Stack:
    settings = {k: v for k, v in host.items() if k != "folder"}
    settings["TRITON_IMAGE"] = builder.STANDIN_IMAGE
    folder = shared_tmp(f"hub-compose-{kind}-")
    return Stack(project_name(kind), FILES, stack_settings(images, **settings, **extra), folder)


def test_the_worker_needs_the_drivers_group_and_says_how_to_find_it(
    images: dict[str, str], host: dict[str, str]
) -> None:
    """Budget: 1 min. Nothing stays up."""
    without = _stack(images, host, "nogid")
    refused = without.compose("config", "-q", check=False)
    assert refused.returncode != 0
    assert "ASCEND_DRIVER_GID" in refused.stderr and HOW_TO_FIND in refused.stderr, refused.stderr

    wrong = _stack(images, host, "wronggid", ASCEND_DRIVER_GID=str(DRIVER_GID + 1))
    try:
        ran = wrong.compose("run", "--rm", "--no-deps", "worker", "true", check=False)
        assert ran.returncode == 78, (ran.returncode, ran.stdout, ran.stderr)
        said = ran.stdout + ran.stderr
        assert "cannot open the NPU device nodes" in said and HOW_TO_FIND in said, said
        assert "/dev/davinci_manager crw-rw----" in said, said
    finally:
        wrong.down()


@pytest.fixture(scope="module")
def stack(images: dict[str, str], host: dict[str, str]) -> Iterator[Stack]:
    running = _stack(images, host, "ascend", ASCEND_DRIVER_GID=str(DRIVER_GID))
    try:
        running.up()
        running.wait_healthy()
        yield running
    finally:
        running.down()


def test_a_model_for_the_standin_soc_verifies_in_the_worker_and_serves_through_acl(
    stack: Stack,
) -> None:
    """Budget: 3 min."""
    api = Api(stack, operator_token(stack, "compose-ascend"))
    # The worker's host report, read from the stand-in npu-smi through the mounted node.
    npus = wait_for(
        "the host report listing the NPUs",
        lambda: api.ok("GET", "/server")["devices"]["npus"],
        120,
    )
    soc = "Ascend" + npus[0]["name"]
    targets = {t["name"]: t for t in api.ok("GET", "/targets")["targets"]}
    assert targets["acl"]["status"]["available"], targets["acl"]["status"]

    api.ok("POST", "/models", {"name": "demo-acl", "target": "acl"})
    options = {"soc_version": soc, "input_shape": "input:1,3,224,224"}
    body, content_type = multipart_file(
        (DEMO / "efficientnet-lite0" / "model.onnx").read_bytes(),
        fields={"options": json.dumps(options)},
    )
    job_id = api.ok("POST", "/models/demo-acl/versions", raw=body, content_type=content_type)["job"]
    job = api.wait_job(job_id)
    assert job["state"] == "succeeded", job
    assert job["commands"][0].startswith(f"{stack.settings['ASCEND_ROOT']}/ascend-toolkit/")

    version = api.ok("GET", "/models/demo-acl/versions/1")
    report = version["verification_report"]
    assert report["status"] == "passed" and report["via"] == "worker_npu", report

    labels = (DEMO / "efficientnet-lite0" / "labels.txt").read_bytes()
    api.ok("PUT", "/models/demo-acl/labels", raw=labels, content_type="text/plain")
    api.ok("PUT", "/models/demo-acl/try-settings", {"preprocess": {"preset": "efficientnet"}})
    served = api.ok("POST", "/models/demo-acl/serve?wait=true", {"version": 1})
    assert served["state"] == "succeeded", served
    first = api.classify("demo-acl")
    assert first["label"] == "espresso" and first["probability"] > 0.9, first


def test_the_selftest_in_the_worker_passes_and_tries_npu_ge_in_the_triton_container(
    stack: Stack,
) -> None:
    """Budget: 3 min."""
    started = time.monotonic()
    done = stack.compose(
        "exec", "-T", "worker", "python", "manage.py", "ascend_selftest",
        "--npu-ge-in-serving-triton", "--json", "-",
        check=False, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-6000:]
    report = json.loads(done.stdout)
    stages = {s["id"]: s for s in report["stages"]}
    print(f"ascend_selftest in the worker: {time.monotonic() - started:.0f} s, "
          + ", ".join(f"{n}={s['verdict']}" for n, s in stages.items()))  # fmt: skip
    assert report["verdict"] == "passed", report
    # npu_ge ran in the Triton container (its stand-in backend), not on the worker's disk.
    ge = [s for n, s in stages.items() if "npu_ge" in n]
    assert ge and all(s["verdict"] == "passed" for s in ge), ge
    # The serving side's CANN is the Triton image's own, as its facts probe reported it.
    assert report["serving_cann"], report


#: Reads tritonserver's environment inside the Triton container (`exec` skips the entrypoint).
TRITON_ENVIRONMENT = """
import pathlib
for proc in pathlib.Path("/proc").glob("[0-9]*"):
    try:
        if b"tritonserver" in (proc / "cmdline").read_bytes().split(b"\\0")[0]:
            print((proc / "environ").read_bytes().replace(b"\\0", b"\\n").decode())
            break
    except OSError:
        pass
"""


def test_triton_runs_with_its_own_cann_and_the_hosts_driver_libraries(stack: Stack) -> None:
    """Budget: 10 s. The Triton image's CANN (sourced by deploy/triton/entrypoint.sh), and the
    driver's three library folders from the host first on the loader's path."""
    lines = stack.exec("triton", "python", "-c", TRITON_ENVIRONMENT).splitlines()
    env = dict(line.partition("=")[::2] for line in lines if "=" in line)
    assert env["ASCEND_TOOLKIT_HOME"] == "/usr/local/Ascend/ascend-toolkit/latest", env
    library_path = env["LD_LIBRARY_PATH"].split(":")
    driver = "/usr/local/Ascend/driver"
    expected = [f"{driver}/lib64/driver", f"{driver}/lib64/common", f"{driver}/lib64"]
    # In CANN's own order, ahead of the image's CANN libraries (the entrypoint puts the Python
    # backend's interpreter folder first of all).
    where = [library_path.index(folder) for folder in expected]
    assert where == sorted(where), library_path
    toolkit = [i for i, p in enumerate(library_path) if p.startswith("/usr/local/Ascend/ascend")]
    assert toolkit and max(where) < min(toolkit), library_path
    # The driver's folders are the host's (mounted), not the image's.
    listed = stack.exec("triton", "ls", f"{driver}/lib64").split()
    assert listed == sorted(
        p.name for p in Path(stack.settings["ASCEND_ROOT"], "driver", "lib64").iterdir()
    )
