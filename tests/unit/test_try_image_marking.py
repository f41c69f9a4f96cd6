"""Marking an input as an image on the Try it tab, and the first-run tour (issue 20).

The "Treat as an image" form saves ``image_inputs`` and ``preprocess`` together through the
action the API uses; operators get the form, viewers see the state; a bad post is a 4xx with
its reason on the page. The empty Models page says what the product does; the demo model's
Overview points at Try it, Performance and Metrics once it serves. (The browser journeys are
tests/browser/test_try_image_journey.py.)
"""

from __future__ import annotations

import pytest
from django.test import Client

from model_store.inference import PRESETS
from tests.fixtures.registry import served_model
from webapp.registry.catalogue import demo
from webapp.registry.catalogue.models import Model, Version
from webapp.registry.jobs.models import Job

SIGNATURE = {
    "inputs": [
        # Its channel axis has no fixed size: it could hold pictures once a layout is chosen.
        {"name": "pixels", "dtype": "TYPE_FP32", "dims": ["batch", "channels", 8, 8]},
        # Looks like a batch of pictures: treated as an image until someone says otherwise.
        {"name": "photo", "dtype": "TYPE_FP32", "dims": ["batch", 3, 16, 16]},
        # Never an image.
        {"name": "x", "dtype": "TYPE_FP32", "dims": ["batch", 4]},
    ],
    "outputs": [{"name": "y", "dtype": "TYPE_FP32", "dims": ["batch", 3]}],
}
PAGE = "/models/cam/try/"
MARK = "/models/cam/try/image/"


@pytest.fixture
def served(operator) -> Model:
    return served_model("cam", operator, SIGNATURE)


def section(html: str, name: str) -> str:
    """The markup of one input's section on the page."""
    start = html.index(f'data-input="{name}"')
    return html[start : html.index("</section>", start)]


def test_operators_get_the_form_where_a_photo_could_fit(operator_client: Client, served) -> None:
    html = operator_client.get(PAGE).content.decode()
    pixels = section(html, "pixels")
    assert 'data-kind="tensor"' in pixels and "<summary>Treat as an image</summary>" in pixels
    assert 'form="image-mark-0" name="image" value="1"' in pixels
    # Every preset, saying what it does; the model's own (ImageNet, the default) is chosen.
    for key in PRESETS:
        assert f'name="preset" value="{key}"' in pixels
    assert 'value="imagenet" checked' in pixels
    assert "short side 256, centre 224 crop; mean 127, std 128; RGB" in pixels
    assert "mean 123.675, 116.28, 103.53" in pixels and "NCHW;" not in pixels
    # The channel axis is free, so the layout is asked for (only NCHW fits [batch, ?, 8, 8]).
    assert 'name="layout"' in pixels and "<option selected>NCHW</option>" in pixels
    assert "NHWC" not in pixels
    # An image-like input is an image already and can be turned back into a tensor.
    photo = section(html, "photo")
    assert 'data-kind="image"' in photo and "its shape looks like a batch of pictures" in photo
    assert 'form="image-mark-1" name="image" value="0"' in photo
    assert "image-mark" not in section(html, "x")
    # The forms the controls belong to sit outside the run form (forms cannot nest).
    assert f'<form id="image-mark-0" method="post" action="{MARK}" hidden>' in html
    assert html.index('id="image-mark-0"') > html.index("</form>")


def test_viewers_see_the_state_without_controls(viewer_client: Client, served) -> None:
    html = viewer_client.get(PAGE).content.decode()
    assert "an operator can mark it as an image" in section(html, "pixels")
    assert "Takes a photo: its shape looks like a batch of pictures" in section(html, "photo")
    assert "image-mark-0" not in html and MARK not in html and 'name="preset"' not in html


def test_marking_saves_the_images_and_the_preset_together(operator_client: Client, served) -> None:
    response = operator_client.post(
        MARK, {"input": "pixels", "image": "1", "preset": "unit", "layout": "NCHW"}
    )
    assert response.status_code == 302 and response["Location"] == PAGE
    served.refresh_from_db()
    assert served.try_settings == {
        "image_inputs": ["pixels", "photo"],
        "preprocess": {**PRESETS["unit"].to_dict(), "layout": "NCHW"},
    }
    page = operator_client.get(PAGE).content.decode()
    assert "pixels now takes a photo, preprocessed as: Pixels scaled to 0..1, layout NCHW" in page
    pixels = section(page, "pixels")
    assert 'data-kind="image"' in pixels and 'name="image-0"' in pixels
    assert "marked as an image by an operator" in pixels and 'name="tensor-0"' not in pixels
    # The run form starts from what was saved.
    assert 'name="pp-0-std" value="255, 255, 255"' in pixels
    # The API reads back the same settings.
    api = operator_client.get("/api/v1/models/cam/try-settings").json()
    assert api["image_inputs"] == ["pixels", "photo"]
    assert api["preprocess"]["layout"] == "NCHW" and api["preprocess"]["std"] == [255.0] * 3


def test_unmarking_turns_the_drop_zone_back_into_a_tensor(operator_client: Client, served) -> None:
    served.try_settings = {"preprocess": PRESETS["efficientnet"].to_dict(), "stale": 1}
    served.save()
    response = operator_client.post(MARK, {"input": "photo", "image": "0"})
    assert response.status_code == 302
    served.refresh_from_db()
    # Only the images change; the preprocessing and other keys stay as they were.
    assert served.try_settings == {
        "image_inputs": [],
        "preprocess": PRESETS["efficientnet"].to_dict(),
        "stale": 1,
    }
    page = operator_client.get(PAGE).content.decode()
    assert "photo now takes a tensor" in page
    photo = section(page, "photo")
    assert 'data-kind="tensor"' in photo and 'name="tensor-1"' in photo
    # Marked as a tensor, it is offered as an image again, its layout read from its shape.
    assert (
        "<summary>Treat as an image</summary>" in photo and "Layout NCHW, from its shape" in photo
    )


def test_custom_saved_preprocessing_can_be_kept(operator_client: Client, served) -> None:
    custom = {**PRESETS["imagenet"].to_dict(), "crop": 200, "color": "BGR"}
    served.try_settings = {"preprocess": custom}
    served.save()
    pixels = section(operator_client.get(PAGE).content.decode(), "pixels")
    assert 'value="saved" checked' in pixels and "centre 200 crop" in pixels
    assert 'value="imagenet" checked' not in pixels
    operator_client.post(
        MARK, {"input": "pixels", "image": "1", "preset": "saved", "layout": "NCHW"}
    )
    served.refresh_from_db()
    assert served.try_settings["preprocess"] == {**custom, "layout": "NCHW"}


def test_viewers_cannot_mark(viewer_client: Client, served) -> None:
    response = viewer_client.post(MARK, {"input": "pixels", "image": "1", "preset": "unit"})
    assert response.status_code == 403
    served.refresh_from_db()
    assert served.try_settings == {}


@pytest.mark.parametrize(
    ("post", "status", "says"),
    [
        ({"input": "nope", "image": "1", "preset": "unit"}, 400, "has no input &#x27;nope&#x27;"),
        ({"input": "x", "image": "1", "preset": "unit"}, 400, "x (TYPE_FP32, [batch, 4]) cannot"),
        ({"input": "pixels", "image": "yes", "preset": "unit"}, 400, "image=1"),
        ({"input": "pixels", "image": "1", "preset": "sepia"}, 400, "Choose a preprocessing"),
        (
            {"input": "pixels", "image": "1", "preset": "unit", "layout": "NHWC"},
            400,
            "not &#x27;NHWC",
        ),
        # A free channel axis with no layout: the same refusal a photo would meet.
        ({"input": "pixels", "image": "1", "preset": "unit"}, 400, "neither axis 1 nor axis 3"),
        ({}, 400, "has no input &#x27;&#x27;"),
    ],
)
def test_a_bad_post_is_refused_with_its_reason(
    operator_client: Client, served, post: dict[str, str], status: int, says: str
) -> None:
    response = operator_client.post(MARK, post)
    assert response.status_code == status
    html = response.content.decode()
    assert 'class="error" role="alert"' in html and says in html
    served.refresh_from_db()
    assert served.try_settings == {}


def test_a_refusal_reopens_that_inputs_form(operator_client: Client, served) -> None:
    response = operator_client.post(
        MARK, {"input": "pixels", "image": "1", "preset": "unit", "layout": "NHWC"}
    )
    pixels = section(response.content.decode(), "pixels")
    assert '<details class="image-mark" open>' in pixels and "can hold a photo in layout" in pixels


def test_an_unserved_or_unknown_model_is_refused(operator_client: Client, operator) -> None:
    Model.objects.create(name="new", created_by=operator)
    response = operator_client.post("/models/new/try/image/", {"input": "x", "image": "1"})
    assert response.status_code == 409 and "not served yet" in response.content.decode()
    assert operator_client.post("/models/none/try/image/", {}).status_code == 404
    assert operator_client.get(MARK).status_code == 405


# ---------------------------------------------------------------- the first-run tour


def test_the_empty_models_page_says_what_the_product_does(operator_client: Client) -> None:
    html = operator_client.get("/models/").content.decode()
    empty = html[html.index('<article class="empty">') :]
    assert "turns an ONNX file into a model that Triton serves, in three steps" in empty
    assert empty.count("<li>") == 3
    for step in ("Upload", "Compile and verify", "Serve"):
        assert f"<strong>{step}</strong>" in empty
    assert "Ascend NPU" in empty and "roll back" in empty and "metrics" in empty
    assert "Add the demo model" in empty


def _demo(operator, *, serving: int | None) -> Model:
    model = Model.objects.create(name=demo.NAME, created_by=operator, serving_version=serving)
    Version.objects.create(
        model=model,
        number=1,
        status=Version.Status.READY if serving else Version.Status.COMPILING,
        source_filename="model.onnx",
        source_sha256="0" * 64,
        source_size=1,
        signature=SIGNATURE,
    )
    return model


def test_the_served_demo_points_at_its_tabs(operator_client: Client, operator) -> None:
    _demo(operator, serving=1)
    html = operator_client.get(f"/models/{demo.NAME}/").content.decode()
    card = html[
        html.index("data-next-steps") : html.index("</article>", html.index("data-next-steps"))
    ]
    for tab in ("try", "perf", "metrics"):
        assert f'href="/models/{demo.NAME}/{tab}/"' in card
    assert "drop a photo" in card and "run a sweep" in card and "live numbers" in card


def test_the_demo_on_its_way_links_its_job(viewer_client: Client, operator) -> None:
    model = _demo(operator, serving=None)
    job = Job.objects.create(
        kind=Job.Kind.COMPILE, model=model, state=Job.State.RUNNING, step="compile"
    )
    html = viewer_client.get(f"/models/{demo.NAME}/").content.decode()
    card = html[html.index("data-next-steps") :]
    assert "The demo is on its way" in card and "is running (compile)" in card
    assert f'href="/jobs/{job.uuid}/"' in card and f"/models/{demo.NAME}/try/" not in card[:600]


def test_other_models_have_no_next_steps(operator_client: Client, served) -> None:
    assert "data-next-steps" not in operator_client.get("/models/cam/").content.decode()
