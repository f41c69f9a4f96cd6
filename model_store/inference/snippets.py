"""Copyable code that calls a model: a curl command and a tritonclient script, both in Triton's
own protocol (KServe v2), through the hub's ``/v2`` gateway or to Triton directly.

Model and input names are chosen by users, so nothing user-controlled is pasted into the
generated text raw: shell words go through ``shlex.quote``, URL path segments through
``urllib.parse.quote``, and Python literals through ``repr``, which always yields one
valid literal on one line (so a name cannot end a string or a comment early).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

from model_store.inference.signature import TensorSpec

# Bigger JSON bodies are unwieldy on a command line (and hit ARG_MAX sooner or later).
INLINE_BODY_LIMIT = 4096
BODY_FILE = "request.json"


def curl_snippet(
    base_url: str, model: str, body: Mapping[str, Any], *, version: int | None = None
) -> str:
    """A shell command that POSTs the v2 JSON ``body`` to the hub's Triton-protocol gateway,
    ``/v2/models/<model>[/versions/<version>]/infer``.

    The token comes from ``$HUB_TOKEN`` so it never lands in the snippet. Bodies over
    :data:`INLINE_BODY_LIMIT` characters are read from ``request.json`` instead, and a
    comment line says so.
    """
    path = f"/v2/models/{quote(model, safe='')}"
    if version is not None:
        path += f"/versions/{int(version)}"
    url = f"{base_url.rstrip('/')}{path}/infer"
    text = json.dumps(dict(body), indent=2)
    lines = []
    if len(text) > INLINE_BODY_LIMIT:
        lines.append(
            f"# The request body is large: save it as {BODY_FILE} in this folder first "
            "(the page offers it as a download)."
        )
        data = f"@{BODY_FILE}"
    else:
        data = shlex.quote(text)
    lines += [
        f"curl -sS -X POST {shlex.quote(url)} \\",
        '  -H "Authorization: Bearer $HUB_TOKEN" \\',
        "  -H 'Content-Type: application/json' \\",
        f"  --data {data}",
    ]
    return "\n".join(lines) + "\n"


def tritonclient_snippet(
    triton_http_url: str,
    model: str,
    version: int | None,
    inputs: Sequence[TensorSpec],
    shapes: Mapping[str, Sequence[int]],
    outputs: Sequence[str],
    *,
    token_env: str | None = None,
) -> str:
    """A runnable Python script that calls the model with ``tritonclient.http``.

    Args:
        triton_http_url: ``host:port``; an ``http://``/``https://`` prefix is handled.
        model: The Triton model name.
        version: Version to call; None lets Triton pick its default.
        inputs: The inputs, for their names and dtypes.
        shapes: Concrete shape per input name; missing ones use the dims with 1 for any size.
        outputs: Output names to request and print.
        token_env: The environment variable holding an API token, for the hub's ``/v2``
            gateway (sent as ``Authorization: Bearer``); None for Triton itself.
    """
    auth_import = "import os\n\n" if token_env else ""
    headers = (
        f'HEADERS = {{"Authorization": "Bearer " + os.environ[{token_env!r}]}}\n'
        if token_env
        else "HEADERS = None\n"
    )
    where = "through the hub's Triton-protocol gateway" if token_env else "on Triton directly"
    address, ssl = _split_scheme(triton_http_url)
    arrays = "".join(
        f"    {spec.name!r}: {_placeholder(spec, _shape(spec, shapes))},\n" for spec in inputs
    )
    datatypes = "".join(f"    {spec.name!r}: {_triton_datatype(spec)!r},\n" for spec in inputs)
    output_names = [str(name) for name in outputs]
    return f'''#!/usr/bin/env python3
"""Calls a model {where}. Needs: pip install "tritonclient[http]" numpy"""

{auth_import}import numpy as np
import tritonclient.http as httpclient

TRITON_URL = {address!r}  # host:port, without http://
MODEL = {model!r}
VERSION = {"" if version is None else str(int(version))!r}  # "" lets Triton choose
OUTPUTS = {output_names!r}
{headers}
client = httpclient.InferenceServerClient(url=TRITON_URL{", ssl=True" if ssl else ""})

# Random placeholders of the right shape and dtype: replace them with your data,
# e.g. np.load("input.npy").astype("float32").
rng = np.random.default_rng(0)
arrays = {{
{arrays}}}
datatypes = {{
{datatypes}}}

inputs = []
for name, array in arrays.items():
    tensor = httpclient.InferInput(name, list(array.shape), datatypes[name])
    tensor.set_data_from_numpy(array)
    inputs.append(tensor)

requested = [httpclient.InferRequestedOutput(name) for name in OUTPUTS]
# A fresh dict per call: infer() adds the binary header's length to the one it is given.
result = client.infer(
    MODEL, inputs, model_version=VERSION, outputs=requested,
    headers=dict(HEADERS) if HEADERS else None,
)

for name in OUTPUTS:
    array = result.as_numpy(name)
    print(name, array.dtype, list(array.shape))
    # Classifier-like output ([N] or [batch, N] floats): show the first row's top 5.
    if array.dtype.kind == "f" and array.ndim in (1, 2) and array.shape[-1] >= 2:
        row = array.reshape(-1, array.shape[-1])[0]
        top = np.argsort(row)[::-1][:5]
        print("  top-5:", [(int(i), round(float(row[i]), 4)) for i in top])
'''


def _split_scheme(url: str) -> tuple[str, bool]:
    """tritonclient wants ``host:port`` and an ``ssl`` flag, not a URL with a scheme."""
    url = url.strip().rstrip("/")
    for scheme, ssl in (("https://", True), ("http://", False)):
        if url.lower().startswith(scheme):
            return url[len(scheme) :], ssl
    return url, False


def _shape(spec: TensorSpec, shapes: Mapping[str, Sequence[int]]) -> tuple[int, ...]:
    given = shapes.get(spec.name)
    if given is None:
        return tuple(d or 1 for d in spec.dims) if spec.rank_known else (1,)
    shape = tuple(int(d) for d in given)  # int() keeps anything but numbers out of the code
    if any(d < 0 for d in shape):
        raise ValueError(f"shape of {spec.name!r} has a negative size: {list(shape)}")
    return shape


def _placeholder(spec: TensorSpec, shape: tuple[int, ...]) -> str:
    """A Python expression making an array of ``shape`` in the input's dtype."""
    dtype = spec.numpy_dtype.name
    if spec.is_string:
        return f'np.full({shape!r}, b"text", dtype=object)'
    if spec.numpy_dtype.kind == "b":
        return f"rng.random({shape!r}) < 0.5"
    if spec.numpy_dtype.kind in "iu":
        return f"rng.integers(0, 10, size={shape!r}).astype({dtype!r})"
    return f"rng.random({shape!r}).astype({dtype!r})"


def _triton_datatype(spec: TensorSpec) -> str:
    """tritonclient's datatype name: ``TYPE_FP32`` -> ``FP32``, strings are ``BYTES``."""
    return "BYTES" if spec.is_string else spec.triton_type.removeprefix("TYPE_")
