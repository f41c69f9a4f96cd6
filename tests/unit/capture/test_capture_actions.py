"""The capture policy's rules, retention, trimming and the export, on captures written by the
real writer (``recorder.write``) into a temporary model store."""

from __future__ import annotations

import io
import time
from typing import Any

import numpy as np
import pytest

from tests.fixtures.registry import served_model
from webapp.errors import HubError
from webapp.registry.capture import actions, recorder
from webapp.registry.capture.models import Capture

pytestmark = pytest.mark.django_db

SIGNATURE = {"inputs": [{"name": "x", "dtype": "TYPE_FP32", "dims": [-1, 4]}],
             "outputs": [{"name": "y", "dtype": "TYPE_FP32", "dims": [-1, 2]}]}  # fmt: skip


@pytest.fixture
def model(operator: Any, settings: Any, tmp_path: Any) -> Any:
    settings.MODEL_STORE_ROOT = tmp_path
    settings.CAPTURE_MIN_FREE_BYTES = 0
    recorder.forget_rates()
    served = served_model("m", operator, SIGNATURE)
    actions.set_policy(served, actions.PolicyIn(), operator)
    return served


def _write(rows: int = 1, when: float | None = None, version: int = 1, width: int = 4) -> str:
    x = np.arange(rows * width, dtype=np.float32).reshape(rows, width)
    item = recorder.Item("m", version, "otto", 1.0, "api", inputs={"x": x},
                         outputs={"y": x[:, :2] * 2})  # fmt: skip
    if when is not None:
        item.when = when
    return recorder.write(item)


def test_out_of_range_settings_are_refused_with_the_field(model: Any, operator: Any) -> None:
    for wanted, field in (
        (actions.PolicyIn(sample_rate=-1), "sample_rate"),
        (actions.PolicyIn(sample_rate=float("nan")), "sample_rate"),
        (actions.PolicyIn(max_items=0), "max_items"),
        (actions.PolicyIn(max_bytes=1000), "max_bytes"),
        (actions.PolicyIn(retention_hours=10**6), "retention_hours"),
    ):
        with pytest.raises(HubError) as refused:
            actions.set_policy(model, wanted, operator)
        assert refused.value.status == 400 and field in str(refused.value.message)


def test_a_lower_cap_trims_at_once_and_the_oldest_go_first(model: Any, operator: Any) -> None:
    now = time.time()
    for age in (50, 40, 30, 20, 10):
        assert _write(when=now - age) == "written"
    actions.set_policy(model, actions.PolicyIn(max_items=2), operator)
    kept = list(Capture.objects.order_by("created"))
    assert len(kept) == 2 and kept[0].created.timestamp() == pytest.approx(now - 20)
    folder = recorder.store().folder("m")
    assert sorted(p.name for p in folder.iterdir()) == sorted(c.file for c in kept)


def test_retention_removes_old_captures_and_their_files(model: Any, operator: Any) -> None:
    actions.set_policy(model, actions.PolicyIn(retention_hours=1), operator)
    _write(when=time.time() - 7200)
    _write()
    assert actions.expire() == 1
    assert Capture.objects.count() == 1
    assert len(list(recorder.store().folder("m").iterdir())) == 1


def test_the_export_joins_what_fits_and_refuses_an_empty_set(model: Any) -> None:
    with pytest.raises(HubError) as refused:
        actions.export_npz(model, actions.Filters())
    assert refused.value.status == 409 and refused.value.code == "no_captures"
    _write(rows=2)
    _write(rows=3)
    _write(rows=1, width=5)  # another shape: left out
    _write(rows=1, version=2)
    data, count = actions.export_npz(model, actions.Filters(version=1))
    assert count == 2
    with np.load(io.BytesIO(data), allow_pickle=False) as archive:
        assert archive["inputs.x"].shape == (5, 4)
        assert archive["outputs.y"].shape == (5, 2)
        assert list(archive["rows"]) == [2, 3] and list(archive["versions"]) == [1, 1]


def test_turned_off_meanwhile_nothing_is_written(model: Any, operator: Any) -> None:
    actions.set_policy(model, actions.PolicyIn(enabled=False), operator)
    assert _write() == "skipped"
    assert not Capture.objects.exists()


def test_a_purge_removes_rows_and_files(model: Any, operator: Any) -> None:
    _write()
    _write()
    assert actions.purge(model, operator) == 2
    assert not Capture.objects.exists()
    assert not recorder.store().folder("m").exists()
