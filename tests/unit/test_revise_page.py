"""The "Edit serving config" page's server side: the form is the version's options, a changed
field becomes a revision (and only changed fields do), a bad value comes back on the form with
nothing written, and viewers are refused. (In a browser with a real worker:
tests/browser/test_revise_journey.py.)"""

from __future__ import annotations

import re

import pytest
from django.test import Client

from model_store.onnx_info import inspect_onnx
from model_store.targets import get_target
from tests.fixtures.pipeline import mlp_payload
from webapp.registry.catalogue.models import Model, Version
from webapp.registry.catalogue.storage import get_store
from webapp.registry.jobs.models import Event, Job

PAGE = "/models/mlp/versions/1/revise/"


@pytest.fixture
def packaged(operator, settings, tmp_path) -> Version:
    """A packaged version 1 of an onnxruntime MLP whose source sits in the store, as a
    finished compile job leaves it (the preview and the revision read the source)."""
    settings.MODEL_STORE_ROOT = tmp_path / "store"
    source = get_store().source_dir("mlp", 1)
    source.mkdir(parents=True)
    (source / "model.onnx").write_bytes(mlp_payload(1))
    info = inspect_onnx(source / "model.onnx")
    options = get_target("onnxruntime").parse_options({}, info=info)
    model = Model.objects.create(name="mlp", target="onnxruntime", created_by=operator)
    return Version.objects.create(
        model=model, number=1, status=Version.Status.READY, source_filename="model.onnx",
        source_sha256="0" * 64, source_size=1, options=options, artifact_name="model.onnx",
        verification={"status": "passed"}, created_by=operator,
    )  # fmt: skip


def field_value(html: str, name: str) -> str:
    tag = re.search(rf'<input[^>]*name="opt_{name}"[^>]*>', html)
    assert tag, f"no field opt_{name}"
    value = re.search(r'value="([^"]*)"', tag.group(0))
    return value.group(1) if value else ""


def form_data(html: str) -> dict[str, str]:
    """What a browser would post for the page as rendered (inputs and selects as prefilled)."""
    data: dict[str, str] = {}
    for tag in re.findall(r"<input[^>]*>", html):
        name = re.search(r'name="([^"]+)"', tag)
        if not name:
            continue
        if 'type="checkbox"' in tag:
            if "checked" in tag:
                data[name.group(1)] = "on"
            continue
        value = re.search(r'value="([^"]*)"', tag)
        data[name.group(1)] = value.group(1) if value else ""
    for name, body in re.findall(r'<select name="([^"]+)"[^>]*>(.*?)</select>', html, re.S):
        chosen = re.search(r'<option value="([^"]*)"[^>]*selected', body)
        data[name] = chosen.group(1) if chosen else ""
    return data


def test_the_form_is_prefilled_with_the_versions_options(operator_client: Client, packaged) -> None:
    response = operator_client.get(PAGE)
    assert response.status_code == 200
    html = response.content.decode()
    assert field_value(html, "instance_count") == "1"
    assert field_value(html, "max_batch_size") == str(packaged.options["max_batch_size"])
    assert field_value(html, "max_queue_delay_us") == "100"
    assert form_data(html)["opt_dynamic_batching"] == "true"  # resolved, not "Automatic"
    # Config-only options come first; the rest sit under the rebuild disclosure.
    assert html.index('name="opt_instance_count"') < html.index("Options that rebuild the model")
    assert html.index("Options that rebuild the model") < html.index('name="opt_fp16"')
    assert "Save as v2" in html
    # The version page links here, and the preview is a partial of this page.
    version_page = operator_client.get("/models/mlp/versions/1/").content.decode()
    assert f'href="{PAGE}"' in version_page and "Edit serving config" in version_page


def test_the_preview_partial_shows_the_diff_and_that_the_artifact_is_reused(
    operator_client: Client, packaged
) -> None:
    data = form_data(operator_client.get(PAGE).content.decode())
    data |= {"opt_instance_count": "2", "preview": "1"}
    response = operator_client.post(PAGE, data, HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    html = response.content.decode()
    assert "<html" not in html  # the partial only
    assert "Reuses the built model and its verification: ready in seconds" in html
    assert '<span class="diff-add">+  count: 2</span>' in html
    assert '<span class="diff-del">-  count: 1</span>' in html
    rebuild = operator_client.post(
        PAGE, data | {"opt_ort_optimization_level": "extended"}, HTTP_HX_REQUEST="true"
    ).content.decode()
    assert "Rebuilds: ort_optimization_level changes the built model" in rebuild
    # Without JavaScript the Preview button posts the same and gets the whole page back.
    whole = operator_client.post(PAGE, data).content.decode()
    assert "<html" in whole and '<span class="diff-add">+  count: 2</span>' in whole
    assert 'value="2"' in whole  # the form keeps what was typed
    assert Version.objects.count() == 1  # a preview writes nothing


def test_saving_a_change_makes_the_revision_from_the_changed_fields_only(
    operator_client: Client, packaged
) -> None:
    data = form_data(operator_client.get(PAGE).content.decode())
    response = operator_client.post(PAGE, data | {"opt_instance_count": "2"})
    revision = Version.objects.get(model__name="mlp", number=2)
    job = Job.objects.get(version=revision)
    assert response.status_code == 302 and response["Location"] == f"/jobs/{job.uuid}/"
    assert revision.revision_of == packaged and revision.options["instance_count"] == 2
    assert {k: v for k, v in revision.options.items() if k != "instance_count"} == {
        k: v for k, v in packaged.options.items() if k != "instance_count"
    }
    assert job.params["changed"] == {"instance_count": [1, 2]}  # nothing else was sent
    assert [s["name"] for s in job.steps] == ["reuse", "package"]
    assert Event.objects.filter(kind="version.revised", version=revision).exists()
    # The new version's page says where it came from; the versions table too.
    page = operator_client.get("/models/mlp/versions/2/").content.decode()
    assert re.search(r'Revision of <a href="/models/mlp/versions/1/">v1</a>', page)
    assert "revision of v1" in operator_client.get("/models/mlp/").content.decode()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        # Django's own field check (a number out of the option's range).
        ({"opt_instance_count": "0"}, "greater than or equal to 1"),
        # model_store's check across options, which only request_revision sees.
        ({"opt_preferred_batch_sizes": "4,16"}, "each preferred size must be at most"),
        ({}, "Nothing changed"),
    ],
)
def test_a_bad_value_comes_back_on_the_form_and_writes_nothing(
    operator_client: Client, packaged, change, message
) -> None:
    data = form_data(operator_client.get(PAGE).content.decode())
    response = operator_client.post(PAGE, data | change)
    assert response.status_code == 400
    html = response.content.decode()
    assert message in html and 'class="error"' in html
    assert Version.objects.count() == 1 and not Job.objects.exists()
    assert not get_store().source_dir("mlp", 2).exists()
    for name, value in change.items():  # the form keeps what was typed
        assert field_value(html, name.removeprefix("opt_")) == value


def test_viewers_are_refused_and_unpackaged_versions_say_why(
    viewer_client: Client, operator_client: Client, packaged
) -> None:
    assert viewer_client.get(PAGE).status_code == 403
    assert viewer_client.post(PAGE, {"opt_instance_count": "2"}).status_code == 403
    assert Version.objects.count() == 1
    version_page = viewer_client.get("/models/mlp/versions/1/").content.decode()
    assert "Edit serving config" not in version_page and "Serve v1" not in version_page
    assert operator_client.get("/models/mlp/versions/9/revise/").status_code == 404
    packaged.status = Version.Status.FAILED
    packaged.save(update_fields=["status"])
    refused = operator_client.get(PAGE)
    assert refused.status_code == 409 and "only a packaged version" in refused.content.decode()
