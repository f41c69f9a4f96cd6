"""The Ascend shape (docker-compose.yml + deploy/hub-ascend.yml) with the CANN stand-ins.

As on an Atlas host, but every Ascend part is a stand-in (docs/deploy.md#the-ascend-shape):

- device nodes made with mknod (char 1:3, like /dev/null), owned by a "driver" group, 0660, in
  a folder given as ASCEND_DEV_DIR/ASCEND_DEVICE: they keep owner and mode in the containers;
- the stand-in CANN tree (tests/fakes/toolkit.py, copied so it works mounted) where
  ASCEND_ROOT says, with the driver's npu-smi (a stand-in) at NPU_SMI_PATH;
- the Triton container is the Ascend-shaped image of ``make compose-images``: its own stand-in
  CANN, pyACL and an npu_ge backend stand-in;
- the stand-in driver's ownership rule, on (tests/compose/standin-driver.yml): the first container
  that opens a chip holds it until that process ends, as on a stock driver
  (tests/fakes/README.md, "Who holds the chip").

By default only Triton's container maps the chip: a model compiled in the worker for the
stand-in SoC verifies through a trial in that Triton, serves through its acl backend and
classifies the coffee photo; the host report's NPUs and the self-test's device stages come from
inside it; the documented first-contact self-test exits 0. With the opt-in that also gives the
worker the chip (deploy/hub-ascend-worker-npu.yml), compose refuses without the driver's group;
with sharing off the loser of the race is told "held by another container" with the command that
turns sharing on, and with sharing on both containers use the chip.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from model_store import spawn
from tests.compose import deploy_page
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

FILES = ["docker-compose.yml", "deploy/hub-ascend.yml", "tests/compose/standin-driver.yml"]
WORKER_NPU_FILES = [*FILES, "deploy/hub-ascend-worker-npu.yml"]
HOW_TO_FIND = "stat -c %g /dev/davinci_manager"
HELD = "held by another container"
SHARE_ON = "npu-smi set -t device-share"
#: The first-contact command docs/deploy-ascend.md gives for compose (a fresh host serves
#: nothing, so the npu_ge trial may go into the serving Triton), with its JSON report asked for.
DOCUMENTED_SELFTEST = (
    *deploy_page.commands(deploy_page.blocks()["one-host-selftest"])[0][1:],
    "--json",
    "-",
)


def _stack(
    images: dict[str, str], host: dict[str, str], kind: str, files: list[str] = FILES, **extra: str
) -> Stack:
    settings = {k: v for k, v in host.items() if k != "folder"}
    settings["ASCEND_TRITON_IMAGE"] = builder.STANDIN_IMAGE
    folder = shared_tmp(f"hub-compose-{kind}-")
    owners = folder / "npu-owners"
    owners.mkdir()
    owners.chmod(0o777)  # root (Triton) and uid 10001 (the worker) both record there
    settings["FAKE_NPU_OWNERS_HOST_DIR"] = str(owners)
    return Stack(project_name(kind), files, stack_settings(images, **settings, **extra), folder)


def _upload_demo(api: Api, stack: Stack, name: str, soc: str) -> dict[str, Any]:
    """The demo as an acl model compiled for ``soc``: the build job, once it ended."""
    api.ok("POST", "/models", {"name": name, "target": "acl"})
    options = {"soc_version": soc, "input_shape": "input:1,3,224,224"}
    body, content_type = multipart_file(
        (DEMO / "efficientnet-lite0" / "model.onnx").read_bytes(),
        fields={"options": json.dumps(options)},
    )
    job_id = api.ok("POST", f"/models/{name}/versions", raw=body, content_type=content_type)["job"]
    job = api.wait_job(job_id)
    assert job["state"] == "succeeded", job
    assert job["commands"][0].startswith(f"{stack.settings['ASCEND_ROOT']}/ascend-toolkit/")
    labels = (DEMO / "efficientnet-lite0" / "labels.txt").read_bytes()
    api.ok("PUT", f"/models/{name}/labels", raw=labels, content_type="text/plain")
    api.ok("PUT", f"/models/{name}/try-settings", {"preprocess": {"preset": "efficientnet"}})
    return job


def _npus(api: Api) -> list[dict[str, Any]]:
    npus: list[dict[str, Any]] = wait_for(
        "the host report listing the NPUs",
        lambda: api.ok("GET", "/server")["devices"]["npus"],
        120,
    )
    return npus


def test_only_the_opt_in_needs_the_drivers_group_and_says_how_to_find_it(
    images: dict[str, str], host: dict[str, str]
) -> None:
    """Budget: 1 min. Nothing stays up."""
    plain = _stack(images, host, "plain")
    assert plain.compose("config", "-q", check=False).returncode == 0

    without = _stack(images, host, "nogid", WORKER_NPU_FILES)
    refused = without.compose("config", "-q", check=False)
    assert refused.returncode != 0
    assert "ASCEND_DRIVER_GID" in refused.stderr and HOW_TO_FIND in refused.stderr, refused.stderr

    wrong = _stack(
        images, host, "wronggid", WORKER_NPU_FILES, ASCEND_DRIVER_GID=str(DRIVER_GID + 1)
    )
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
    """The one-host layout brought up by following docs/deploy-ascend.md in a clean checkout:
    its image command (the recipe on stand-in packages), its .env lines (read off the stand-in
    host by deploy/ascend-host-env.sh), its first commands. The test adds only what stands in
    for the host: the stand-in driver's override and the host fixture's record and DCMI paths."""
    page = deploy_page.blocks()
    folder = shared_tmp("hub-compose-page-")
    checkout = deploy_page.clean_checkout(folder)
    build_command = deploy_page.commands(page["ascend-image"])[0]
    home = deploy_page.operator_home(folder, build_command)
    started = time.monotonic()
    deploy_page.run_block(page["ascend-image"], checkout, {
        "HOME": str(home),
        "ASCEND_BASE_IMAGE": builder.PYTHON_IMAGE,
        "ASCEND_WHEELS": str(builder.recipe_wheel_dir()),
        "ASCEND_GE_BACKEND": str(checkout / "tests" / "fakes" / "npu_ge"),
    })  # fmt: skip
    print(f"the page's Ascend image built in {time.monotonic() - started:.0f} s")

    # The .env make compose-images wrote, then the page's lines, read off the stand-in host.
    env_file = checkout / ".env"
    env_file.write_text("".join(f"{k}={v}\n" for k, v in stack_settings(images).items()))
    deploy_page.run_block(page["one-host-env"], checkout, {
        "HOME": str(home),
        "HUB_DEV_DIR": host["ASCEND_DEV_DIR"],
        "ASCEND_ROOT": host["ASCEND_ROOT"],
        "PATH": f"{Path(host['NPU_SMI_PATH']).parent}:{os.environ['PATH']}",
    })  # fmt: skip
    settings = deploy_page.env_lines(env_file.read_text())
    assert settings.pop("COMPOSE_FILE").split(":") == FILES[:2], settings
    assert "ASCEND_TRITON_IMAGE" not in settings and "TRITON_IMAGE" in settings
    for name in ("ASCEND_ROOT", "ASCEND_DEVICE", "ASCEND_DEV_DIR", "NPU_SMI_PATH"):
        assert settings[name] == host[name], (name, settings)
    owners = folder / "npu-owners"
    owners.mkdir()
    owners.chmod(0o777)
    settings.update(
        ASCEND_INSTALL_INFO=host["ASCEND_INSTALL_INFO"], ASCEND_DCMI_DIR=host["ASCEND_DCMI_DIR"],
        FAKE_NPU_OWNERS_HOST_DIR=str(owners),
    )  # fmt: skip
    running = Stack(project_name("ascend"), FILES, settings, folder, project_dir=checkout)
    try:
        for command in deploy_page.commands(page["one-host-up"]):
            assert command[0] == "docker-compose", command
            running.compose(*command[1:], timeout=900)
        running.wait_healthy()
        yield running
    finally:
        running.down()


def _devices_of(stack: Stack, service: str) -> list[str]:
    done = spawn.run(
        ["docker", "inspect", "-f", "{{json .HostConfig.Devices}}", stack.container(service)],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    return [d["PathInContainer"] for d in json.loads(done.stdout) or []]


def test_the_chip_is_mapped_into_triton_alone_and_serves_from_there(stack: Stack) -> None:
    """Budget: 3 min. Verification, serving and Try it with the chip in Triton's container."""
    assert _devices_of(stack, "worker") == []
    assert any(p.endswith("/davinci0") for p in _devices_of(stack, "triton"))
    api = Api(stack, operator_token(stack, "compose-ascend"))
    # The host report's NPUs, read by npu-smi inside the Triton container.
    npus = _npus(api)
    assert api.ok("GET", "/server")["devices"].get("seen_in") == "triton"
    soc = "Ascend" + npus[0]["name"]
    targets = {t["name"]: t for t in api.ok("GET", "/targets")["targets"]}
    assert targets["acl"]["status"]["available"], targets["acl"]["status"]

    _upload_demo(api, stack, "demo-acl", soc)
    report = api.ok("GET", "/models/demo-acl/versions/1")["verification_report"]
    # The worker does not open the chip: the OM ran in a trial inside Triton.
    assert report["status"] == "passed" and report["via"] == "triton", report

    served = api.ok("POST", "/models/demo-acl/serve?wait=true", {"version": 1})
    assert served["state"] == "succeeded", served
    first = api.classify("demo-acl")
    assert first["label"] == "espresso" and first["probability"] > 0.9, first


def test_the_documented_selftest_passes_with_the_chip_in_triton_alone(stack: Stack) -> None:
    """Budget: 3 min. docs/ascend.md's first-contact command exits 0; the device stages ran
    inside the Triton container."""
    started = time.monotonic()
    done = stack.compose(*DOCUMENTED_SELFTEST, check=False, timeout=600)
    assert done.returncode == 0, done.stderr[-6000:]
    report = json.loads(done.stdout)
    stages = {s["id"]: s for s in report["stages"]}
    print(f"ascend_selftest in the worker: {time.monotonic() - started:.0f} s, "
          + ", ".join(f"{n}={s['verdict']}" for n, s in stages.items()))  # fmt: skip
    assert report["verdict"] == "passed", report
    assert stages["npus"]["evidence"]["seen_in"] == "triton", stages["npus"]
    assert stages["pyacl"]["evidence"]["ran_in"] == "triton", stages["pyacl"]
    # npu_ge ran in the Triton container (its stand-in backend), not on the worker's disk.
    ge = [s for n, s in stages.items() if "npu_ge" in n]
    assert ge and all(s["verdict"] == "passed" for s in ge), ge
    # The serving side's CANN is the Triton image's own, as its facts probe reported it.
    assert report["serving_cann"], report


def test_with_the_chip_given_to_the_worker_too_the_loser_hears_why(
    images: dict[str, str], host: dict[str, str]
) -> None:
    """Budget: 4 min. The opt-in with sharing off: the worker verifies first and keeps the chip
    (its Celery process lives on), so Triton's acl load is refused and the hub says the chip is
    held by another container, with the command; with sharing on, Triton serves it."""
    shared = _stack(images, host, "workernpu", WORKER_NPU_FILES, ASCEND_DRIVER_GID=str(DRIVER_GID))
    try:
        shared.up()
        shared.wait_healthy()
        assert any(p.endswith("/davinci0") for p in _devices_of(shared, "worker"))
        api = Api(shared, operator_token(shared, "compose-shared"))
        chip = _npus(api)[0]
        _upload_demo(api, shared, "demo-shared", "Ascend" + chip["name"])
        report = api.ok("GET", "/models/demo-shared/versions/1")["verification_report"]
        assert report["status"] == "passed" and report["via"] == "worker_npu", report

        status, served = api.call("POST", "/models/demo-shared/serve?wait=true", {"version": 1})
        assert status == 409 and served["state"] == "failed", (status, served)
        # Said first, with the command; the driver/CANN mismatch only after it.
        told = str(served["error"])
        assert HELD in told and SHARE_ON in told, told
        assert told.index(HELD) < told.index("driver and the CANN"), told

        # Root on the host turns the chip's container sharing on, with the command the hub
        # gave (the stand-in driver records it; its script, run with this interpreter).
        owners = shared.settings["FAKE_NPU_OWNERS_HOST_DIR"]
        smi = Path(host["ASCEND_ROOT"], "standins", "tests", "fakes", "npu-smi")
        ids = ["-i", str(chip["npu_id"]), "-c", str(chip["chip_id"])]
        spawn.run(
            [sys.executable, str(smi), "set", "-t", "device-share", *ids, "-d", "1"],
            env={**os.environ, "FAKE_NPU_OWNERS_DIR": owners}, check=True, timeout=60,
        )  # fmt: skip
        served = api.ok("POST", "/models/demo-shared/serve?wait=true", {"version": 1})
        assert served["state"] == "succeeded", served
        first = api.classify("demo-shared")
        assert first["label"] == "espresso", first
    finally:
        shared.down()


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
