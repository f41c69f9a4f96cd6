"""First contact with an Ascend host, played by the CANN stand-ins plugged in as real CANN is.

The whole stack starts as ``make run`` starts it (``python -m webapp.stack``) with nothing
but what an operator of a real host would set: ``ASCEND_TOOLKIT_HOME`` naming a
toolkit-shaped folder (tests/fakes/toolkit.py) and ``npu-smi`` on ``PATH``. No
``PYTHONPATH`` to the fakes, no ``ATC_PATH``, no ``FAKE_*`` setting: the worker finds ATC
and pyACL in the toolkit, Triton's ``acl`` backend finds pyACL there by itself, and the
host report reads the NPUs from ``npu-smi``. The demo classifier then goes through the
``acl`` target, from upload to a classified photo.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from model_store import spawn
from tests.fakes.toolkit import make_fake_toolkit
from tests.fixtures.multipart import multipart_file
from tests.fixtures.stack import ROOT, fresh_machine_env, wait_for_line
from tests.fixtures.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.stack]

DEMO = ROOT / "demo"
#: Settings a developer's shell may carry that would reach the fakes by another way.
NOT_A_REAL_HOSTS = ("PYTHONPATH", "ATC_PATH", "ATC_PYTHON", "ASCEND_", "FAKE_")


class Hub:
    """The API of a running stack, with an operator's token."""

    def __init__(self, port: int, token: str, toolkit_home: str, host: str = "") -> None:
        self.base = f"http://127.0.0.1:{port}/api/v1"
        self.headers = {"Authorization": f"Token {token}"}
        self.toolkit_home = toolkit_home
        self.host = host

    def call(
        self, method: str, path: str, body: Any = None, *, raw: bytes | None = None,
        content_type: str = "application/json",
    ) -> tuple[int, Any]:  # fmt: skip
        data = raw if raw is not None else None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.base + path, data=data, method=method,
            headers={**self.headers, "Content-Type": content_type},
        )  # fmt: skip
        try:
            with urllib.request.urlopen(request, timeout=120) as response:
                status, payload = response.status, response.read()
        except urllib.error.HTTPError as error:
            status, payload = error.code, error.read()
        return status, json.loads(payload) if payload else {}

    def ok(self, method: str, path: str, body: Any = None, **kwargs: Any) -> Any:
        status, answer = self.call(method, path, body, **kwargs)
        assert 200 <= status < 300, f"{method} {path}: {status} {answer}"
        return answer


def _real_hosts_environment(tmp_path: Path) -> dict[str, str]:
    """A fresh machine's environment plus the toolkit's two settings, and nothing else."""
    env = {
        key: value
        for key, value in fresh_machine_env(tmp_path / "var").items()
        if not key.startswith(NOT_A_REAL_HOSTS)
    }
    toolkit = make_fake_toolkit(tmp_path / "Ascend", layout="cann", path=env["PATH"])
    assert set(toolkit) == {"ASCEND_TOOLKIT_HOME", "PATH"}
    return env | toolkit


#: The hosts the journey runs on: the npu-smi table the stand-ins print (a real, public one each,
#: tests/fakes/npu_smi_samples) and what the hub must read from it: NPU and device ids, the SoC.
HOSTS = {
    "310P3 x2": (None, [(4, 0), (5, 1)], "Ascend310P3"),
    "910B4-1 x8": ("910b4-1_x8_npu-smi-25.2.0.txt", [(i, i) for i in range(8)], "Ascend910B4-1"),
}


@pytest.fixture(params=sorted(HOSTS))
def hub(tmp_path: Path, request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    env = _real_hosts_environment(tmp_path)
    sample = HOSTS[request.param][0]
    if sample:
        env["FAKE_NPU_SMI_SAMPLE"] = sample  # which card the stand-ins' host has
    log = tmp_path / "stack.log"
    with log.open("wb") as out:
        proc = spawn.start(
            [sys.executable, "-m", "webapp.stack"], cwd=ROOT, env=env, stdout=out,
            stderr=subprocess.STDOUT, new_session=True,
        )  # fmt: skip
    try:
        wait_for_line(log, "Triton Model Hub is ready", proc, timeout=240)
        token = spawn.run(
            [sys.executable, "manage.py", "apitoken", "first-contact", "--role", "operator"],
            cwd=ROOT, env=env, capture_output=True, text=True, check=True, timeout=120,
        ).stdout.split()[-1]  # fmt: skip
        yield Hub(int(env["HUB_PORT"]), token, env["ASCEND_TOOLKIT_HOME"], request.param)
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(90)


def test_the_demo_classifier_goes_through_acl_on_a_host_set_up_like_real_cann(hub: Hub) -> None:
    # The Server page's devices: the worker's host report, read from npu-smi.
    devices = wait_until(
        lambda: (d := hub.ok("GET", "/server")["devices"])["npus"] and d, 60, interval=0.5,
        message="the host report lists no NPU",
    )  # fmt: skip
    _, ids, expected_soc = HOSTS[hub.host]
    assert [(n["npu_id"], n["device_id"]) for n in devices["npus"]] == ids
    soc = "Ascend" + devices["npus"][0]["name"]
    assert soc == expected_soc
    targets = {t["name"]: t for t in hub.ok("GET", "/targets")["targets"]}
    assert targets["acl"]["status"]["available"], targets["acl"]["status"]

    hub.ok("POST", "/models", {"name": "demo-acl", "target": "acl"})
    options = {"soc_version": soc, "input_shape": "input:1,3,224,224"}
    body, content_type = multipart_file(
        (DEMO / "efficientnet-lite0" / "model.onnx").read_bytes(),
        fields={"options": json.dumps(options)},
    )
    job_id = hub.ok("POST", "/models/demo-acl/versions", raw=body, content_type=content_type)["job"]
    job = wait_until(
        lambda: (j := hub.ok("GET", f"/jobs/{job_id}"))["state"] in ("succeeded", "failed") and j,
        120, interval=0.5, message=f"job {job_id} did not finish",
    )  # fmt: skip
    assert job["state"] == "succeeded", job["error"]
    assert job["commands"][0].startswith(f"{hub.toolkit_home}/bin/atc --model=")

    version = hub.ok("GET", "/models/demo-acl/versions/1")
    report = version["verification_report"]
    assert report["status"] == "passed" and report["via"] == "worker_npu", report
    assert version["publishable"] is True

    labels = (DEMO / "efficientnet-lite0" / "labels.txt").read_bytes()
    hub.ok("PUT", "/models/demo-acl/labels", raw=labels, content_type="text/plain")
    hub.ok("PUT", "/models/demo-acl/try-settings", {"preprocess": {"preset": "efficientnet"}})
    served = hub.ok("POST", "/models/demo-acl/serve?wait=true", {"version": 1})
    assert served["state"] == "succeeded", served

    photo = base64.b64encode((DEMO / "images" / "coffee.png").read_bytes()).decode()
    answer = hub.ok("POST", "/models/demo-acl/infer", {"inputs": {"input": {"image_b64": photo}}})
    first = answer["outputs"][0]["top_k"][0]
    assert first["label"] == "espresso" and first["probability"] > 0.9, answer["outputs"]
