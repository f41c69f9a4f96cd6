"""The inputs an INT8 quantisation calibrates on and is checked on: what a person asked for
(the model's captured requests, its saved Try it examples, or an uploaded ``.npz``), chosen
when the request is made and read again by the worker.

The request only reads metadata (the captures' recorded shapes, the ``.npz`` headers), so a
refusal is immediate and cheap; the worker reads the tensors. Inputs are kept oldest first:
``model_store.quantize.split`` calibrates on the older ones and checks on the newest.
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from django.utils.translation import gettext

from model_store.dtypes import npy_header, triton_to_numpy
from model_store.inference import decode_inputs
from model_store.inference.errors import InferenceInputError
from webapp.errors import HubError
from webapp.registry.capture import actions as capture_actions
from webapp.registry.capture.models import Capture
from webapp.registry.catalogue.models import Version
from webapp.registry.tryit.inference import input_specs, limits, saved_preprocess
from webapp.registry.tryit.models import TryExample

#: Where a person may take calibration inputs from.
SOURCES = ("captures", "examples", "upload")
#: Bytes of a calibration upload the worker will read (256 ImageNet photos are ~150 MB).
MAX_UPLOAD_BYTES = 2 << 30
#: How many captures' metadata a request looks through for ``max_items`` that fit.
_LOOK_FACTOR = 4


@dataclass(frozen=True)
class Chosen:
    """The inputs chosen for one quantisation, oldest first."""

    source: str
    #: Capture or example ids, or row numbers of the upload.
    ids: list[int]
    #: For an upload: the ``.npz`` in the job's work directory, and the keys per input.
    upload_path: str = ""
    upload_keys: dict[str, str] | None = None

    def to_params(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "ids": self.ids,
            "upload_path": self.upload_path,
            "upload_keys": self.upload_keys,
        }

    @classmethod
    def from_params(cls, data: dict[str, Any]) -> Chosen:
        return cls(
            source=str(data["source"]),
            ids=[int(i) for i in data["ids"]],
            upload_path=str(data.get("upload_path") or ""),
            upload_keys=data.get("upload_keys"),
        )


def _bad(message: str, code: str = "invalid_calibration") -> HubError:
    return HubError(message, code, 400)


def _shape_fits(shape: list[int], dims: list[Any]) -> bool:
    """A named (``"batch"``) or unknown (-1, None) dim takes any size; a number, itself."""
    return len(shape) == len(dims) and all(
        not isinstance(d, int) or d < 0 or d == s for s, d in zip(shape, dims, strict=True)
    )


def _signature_inputs(version: Version) -> list[dict[str, Any]]:
    return list((version.signature or {}).get("inputs") or [])


def captures(version: Version, max_items: int) -> Chosen:
    """The newest ``max_items`` captured requests of the model whose recorded inputs fit
    ``version`` (names, types, shapes), oldest first."""
    wanted = {t["name"]: t for t in _signature_inputs(version)}
    ids: list[int] = []
    rows = Capture.objects.filter(model=version.model).values_list("pk", "inputs")
    for pk, inputs in rows[: max_items * _LOOK_FACTOR]:
        meta = {t.get("name"): t for t in inputs or [] if isinstance(t, dict)}
        if set(meta) != set(wanted):
            continue
        if all(
            meta[n].get("datatype") in (spec.get("numpy"), spec["dtype"])
            and _shape_fits(list(meta[n].get("shape") or []), list(spec["dims"]))
            for n, spec in wanted.items()
        ):
            ids.append(pk)
            if len(ids) == max_items:
                break
    return Chosen("captures", ids[::-1])


def examples(version: Version, max_items: int) -> Chosen:
    """The model's saved Try it examples that decode to ``version``'s inputs, oldest first."""
    ids = [
        example.pk
        for example in version.model.examples.order_by("-created", "-id")[: max_items * 2]
        if _example_arrays(version, example) is not None
    ][:max_items]
    return Chosen("examples", ids[::-1])


def _example_arrays(version: Version, example: TryExample) -> dict[str, np.ndarray] | None:
    try:
        return decode_inputs(
            input_specs(version),
            example.inputs,
            limits(),
            default_preprocess=saved_preprocess(version.model),
        )
    except InferenceInputError:
        return None


def upload_keys(version: Version, path: Path, max_items: int) -> tuple[dict[str, str], int]:
    """Which arrays of an uploaded ``.npz`` feed which input, and how many rows it holds.

    An array is named after its input, or ``inputs.<name>`` as the captures export writes
    it; the first axis counts the items, the rest must fit the input's shape. Only the
    headers are read.

    Raises:
        HubError: 400 ``invalid_calibration`` naming what does not fit the signature.
    """
    headers = _npz_headers(path)
    keys: dict[str, str] = {}
    rows: set[int] = set()
    for spec in _signature_inputs(version):
        name = spec["name"]
        key = next((k for k in (f"inputs.{name}", name) if k in headers), None)
        if key is None:
            raise _bad(
                gettext("The calibration file has no array for input %(input)s (it has %(keys)s).")
                % {"input": name, "keys": ", ".join(sorted(headers)[:8]) or gettext("none")}
            )
        shape, dtype = headers[key]
        expected = triton_to_numpy(spec["dtype"])
        if dtype != expected:
            raise _bad(
                gettext("Array %(key)s is %(got)s; input %(input)s takes %(want)s.")
                % {"key": key, "got": dtype.name, "input": name, "want": expected.name}
            )
        dims = list(spec["dims"])
        # Each row is one item of batch 1: the row's shape is the input's without its batch.
        item = [1, *shape[1:]]
        if not shape or not _shape_fits(item, dims):
            raise _bad(
                gettext(
                    "Array %(key)s has shape %(shape)s: its rows do not fit input %(input)s "
                    "of shape %(dims)s (the first axis counts the items)."
                )
                % {"key": key, "shape": list(shape), "input": name, "dims": dims}
            )
        keys[name] = key
        rows.add(shape[0])
    if len(rows) != 1:
        raise _bad(gettext("The calibration arrays hold different numbers of rows."))
    return keys, rows.pop()


def _npz_headers(path: Path) -> dict[str, tuple[tuple[int, ...], np.dtype[Any]]]:
    """``{array name: (shape, dtype)}`` of an ``.npz``, from its headers only; no pickles."""
    try:
        with zipfile.ZipFile(path) as archive:
            found = {}
            for member in archive.infolist()[:64]:
                if not member.filename.endswith(".npy"):
                    continue
                with archive.open(member) as fh:
                    shape, dtype = npy_header(fh)
                if dtype.hasobject:
                    raise ValueError("object arrays are not accepted")
                found[member.filename[: -len(".npy")]] = (tuple(shape), dtype)
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as exc:
        raise _bad(
            gettext("The calibration upload is not a readable .npz file: %(error)s")
            % {"error": str(exc)[:200]}
        ) from None
    if not found:
        raise _bad(gettext("The calibration .npz holds no arrays."))
    return found


def load(version: Version, chosen: Chosen) -> Iterator[tuple[int, dict[str, np.ndarray]]]:
    """The chosen inputs as arrays, oldest first, as ``(id, inputs)``; those gone since the
    request (a capture trimmed, an example deleted) are skipped."""
    if chosen.source == "captures":
        by_id = {c.pk: c for c in Capture.objects.filter(pk__in=chosen.ids).select_related("model")}
        for pk in chosen.ids:
            capture = by_id.get(pk)
            if capture is None:
                continue
            try:
                inputs, _ = capture_actions.tensors(capture)
            except HubError:
                continue
            yield pk, inputs
    elif chosen.source == "examples":
        found = {e.pk: e for e in TryExample.objects.filter(pk__in=chosen.ids)}
        for pk in chosen.ids:
            example = found.get(pk)
            arrays = _example_arrays(version, example) if example is not None else None
            if arrays is not None:
                yield pk, arrays
    else:
        with np.load(chosen.upload_path, allow_pickle=False) as data:
            keys = chosen.upload_keys or {}
            columns = {name: data[key] for name, key in keys.items()}
            for row in chosen.ids:
                yield row, {name: col[row : row + 1] for name, col in columns.items()}
