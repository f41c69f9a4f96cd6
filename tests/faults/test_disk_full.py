"""The store's disk nearly full: uploads and builds refuse, with the numbers, and leave nothing.

The store (``MODEL_STORE_ROOT``) is on a 48 MiB tmpfs of its own (``conftest.SmallDisk``; where
mounting is refused, a folder on the ordinary disk with the floor set just under its free
space) and ``STORE_MIN_FREE_BYTES`` is 8 MiB. A ballast file steers the free space:

- an upload larger than the room above the floor is refused at once (507);
- a chunk that would cross the floor is refused before a byte lands (507), and the upload
  can be cancelled;
- a compile whose build would cross the floor fails with the numbers
  (``insufficient_storage``), and so does packaging when the disk fills during ATC;
- nothing partial remains (no upload files, scratch files, package or repository version),
  and once space is freed the same file builds.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.faults.conftest import ACL_OPTIONS, Hub, SmallDisk, moment_when, report
from tests.fixtures.triton import mlp_onnx_bytes

pytestmark = [pytest.mark.integration, pytest.mark.faults]

MIB = 1 << 20
FLOOR = 8 * MIB


@pytest.fixture(scope="module")
def disk_hub(small_disk: SmallDisk, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    """A stack of its own (SQLite, embedded Redis) whose store is on the small disk."""
    floor = FLOOR if small_disk.tmpfs else max(FLOOR, small_disk.free() - 40 * MIB)
    running = Hub(
        tmp_path_factory.mktemp("faults-disk-hub"),
        {
            "MODEL_STORE_ROOT": str(small_disk.path / "store"),
            "STORE_MIN_FREE_BYTES": str(floor),
            "FAKE_ATC_SLEEP": "6",
        },
    )
    running.floor = floor  # type: ignore[attr-defined]
    try:
        yield running
    finally:
        running.stop()


def _entries(path: Path) -> list[Path]:
    return sorted(path.iterdir()) if path.is_dir() else []


def _assert_nothing_partial(hub: Hub, name: str, number: int | None = None) -> None:
    store = hub.store
    assert _entries(store / "uploads") == []
    assert _entries(store / "work") == []
    if number is not None:
        assert not (store / "sources" / name / str(number) / "package").exists()
        assert not (store / "repository" / name / str(number)).exists()


def test_a_nearly_full_store_refuses_uploads_and_builds_with_the_numbers(
    disk_hub: Hub, small_disk: SmallDisk
) -> None:
    """Time budget: 90 s (a stack of its own, three builds of 4 MiB models)."""
    hub, floor = disk_hub, disk_hub.floor  # type: ignore[attr-defined]
    floor_text = f"{floor / MIB:.1f}".removesuffix(".0") + " MiB"
    hub.ensure_model("disk-ort")
    hub.ensure_model("disk-om", "acl")

    # 1. An upload that does not fit above the floor: refused at once, nothing created.
    size = small_disk.free() - floor + MIB
    refused = hub.call("POST", "/api/v1/uploads", {"filename": "big.onnx", "size": size})
    assert refused.status == 507, (refused.status, refused.body)
    assert refused.body["code"] == "insufficient_storage"
    assert "free" in refused.error and f"{floor_text} must stay free" in refused.error
    _assert_nothing_partial(hub, "disk-ort")

    # 2. A chunk that would cross the floor: refused before a byte lands.
    created = hub.ok("POST", "/api/v1/uploads", {"filename": "m.onnx", "size": 2 * MIB})
    small_disk.fill_to(floor + MIB)
    chunk = hub.call(
        "PUT", f"/api/v1/uploads/{created['id']}", raw=b"\0" * (2 * MIB),
        headers={"Upload-Offset": "0", "Content-Type": "application/octet-stream"},
    )  # fmt: skip
    assert chunk.status == 507, (chunk.status, chunk.body)
    assert "this chunk needs 2 MiB" in chunk.error and f"{floor_text} must stay free" in chunk.error
    assert hub.ok("GET", f"/api/v1/uploads/{created['id']}")["offset"] == 0
    assert hub.call("DELETE", f"/api/v1/uploads/{created['id']}").status == 204
    small_disk.empty()
    _assert_nothing_partial(hub, "disk-ort")

    # 3. A compile whose build would cross the floor: the job fails with the numbers.
    payload = mlp_onnx_bytes(in_features=1024, out_features=1024, seed=71)  # 4 MiB
    small_disk.fill_to(floor + len(payload) + 2 * MIB)
    started = time.monotonic()
    version = hub.add_version("disk-ort", payload)
    job = hub.wait_job(version["job"])
    compile_refused = time.monotonic() - started
    assert job["state"] == "failed" and job["error_code"] == "insufficient_storage", job
    assert "compiling" in job["error"] and f"{floor_text} must stay free" in job["error"], job
    assert hub.versions("disk-ort")[version["version"]]["status"] == "failed"
    _assert_nothing_partial(hub, "disk-ort", version["version"])
    small_disk.empty()
    again = hub.add_version("disk-ort", payload)
    assert hub.wait_job(again["job"])["state"] == "succeeded"

    # 4. The disk fills while ATC runs: packaging refuses with the numbers.
    om = hub.add_version("disk-om", mlp_onnx_bytes(in_features=1024, out_features=1024, seed=72),
                         ACL_OPTIONS)  # fmt: skip
    hub.wait_step(om["job"], "compile")
    # The step opens with its own free-space check and makes the build folder only after it,
    # so the disk fills "while ATC runs" once that folder is there.
    build_dir = hub.store / "work" / om["job"].replace("-", "") / "build"
    moment_when("ATC's build folder", build_dir.is_dir, 60)
    small_disk.fill_to(floor + MIB)
    filled = time.monotonic()
    job = hub.wait_job(om["job"])
    package_refused = time.monotonic() - filled
    assert job["state"] == "failed" and job["error_code"] == "insufficient_storage", job
    assert "packaging" in job["error"] and f"{floor_text} must stay free" in job["error"], job
    _assert_nothing_partial(hub, "disk-om", om["version"])
    small_disk.empty()
    assert hub.running_jobs() == []
    report(
        f"store disk nearly full ({'tmpfs' if small_disk.tmpfs else 'free-space floor'}): "
        "upload, chunk, compile and packaging refused with the numbers",
        [
            ("the compile job failed after it was queued", compile_refused),
            ("the ATC build failed at packaging after the disk filled", package_refused),
        ],
    )
    print(f"[faults]   upload refused: {refused.error}")
    print(f"[faults]   chunk refused: {chunk.error}")
    print(f"[faults]   build refused: {job['error']}")
