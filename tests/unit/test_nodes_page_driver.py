"""The Nodes page warns when a node's NPU driver is too old for the CANN that serves there."""

from __future__ import annotations

from typing import Any

import pytest

from tests.fixtures.nodes import Node_, report

pytestmark = pytest.mark.django_db


def _reported(settings: Any, *, driver: str, serving_cann: str | None) -> None:
    settings.TRITON_URL = "127.0.0.1:9"  # no Triton: the page says so, quickly
    body = report("b")
    body["devices"] = {**body["devices"], "version": driver}
    if serving_cann:
        body["serving"] = {"available": True, "cann": {"available": True, "version": serving_cann}}
    assert Node_("b").report(body).status_code == 200


def _cann_cell(page: str) -> str:
    row = page.split('id="node-b"', 1)[1].split("</tr>", 1)[0]
    return row


def test_a_driver_too_old_for_the_serving_cann_is_a_warning_on_its_row(viewer_client, settings):
    _reported(settings, driver="24.1.rc1", serving_cann="9.1.0")
    page = viewer_client.get("/nodes/").content.decode()
    row = _cann_cell(page)
    assert 'data-check="driver" data-state="too_old"' in row and 'class="note"' in row
    assert "Ascend HDK 24.1.rc1" in row and "CANN 9.1.0" in row and "25.2.X or newer" in row
    assert 'class="error"' not in row  # a warning, not an error
    assert 'id="node-b" data-state="up"' in page  # the node stays up


def test_a_driver_new_enough_or_a_cann_not_in_the_table_shows_nothing(viewer_client, settings):
    _reported(settings, driver="25.0.rc1", serving_cann=None)  # the worker's 8.5.0: fine
    assert 'data-check="driver"' not in _cann_cell(viewer_client.get("/nodes/").content.decode())
    _reported(settings, driver="24.1.rc1", serving_cann="8.3.RC2")  # not in the table
    assert 'data-check="driver"' not in _cann_cell(viewer_client.get("/nodes/").content.decode())


def test_the_check_is_in_the_nodes_summary(viewer_client, settings):
    from webapp.nodes import summaries

    _reported(settings, driver="24.1.rc1", serving_cann="9.1.0")
    found = summaries.summary_of("b")["driver"]
    assert found["state"] == "too_old" and found["driver"] == "24.1.rc1"
    assert found["cann"] == "9.1.0" and found["minimum"] == "25.2.X"
