"""Fake ``acl.mdl``: load a fake OM, describe it, datasets, execute (tests only; not pyACL).

``execute`` reads the input buffers from fake device memory, runs the ONNX
model stored inside the fake OM with onnxruntime (so the "NPU" computes the
true function, in float16 when the OM was built with ATC's default
precision), and writes the outputs into the output buffers.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _fake
from ._fake import (
    ACL_ERROR_INVALID_MODEL_ID,
    ACL_ERROR_INVALID_PARAM,
    ACL_ERROR_MODEL_INPUT_NOT_MATCH,
    ACL_ERROR_MODEL_NOT_DYNAMIC,
    ACL_ERROR_MODEL_OUTPUT_NOT_MATCH,
    ACL_ERROR_RT_CONTEXT_NULL,
    ACL_ERROR_UNINITIALIZE,
    ACL_SUCCESS,
    ACL_TO_NUMPY,
    MBATCH_INPUT,
    Model,
    record,
)


def _context_device() -> int | None:
    s = _fake.state()
    ctx = s.current_context
    if ctx is None:
        return None
    if ctx in s.contexts:
        return s.contexts[ctx]
    return next((dev for dev, c in s.default_contexts.items() if c == ctx), None)


def load_from_file(path: str) -> tuple[int, int]:
    record("mdl.load_from_file")
    s = _fake.state()
    if not s.initialized:
        return 0, ACL_ERROR_UNINITIALIZE
    device = _context_device()
    if device is None:
        return 0, ACL_ERROR_RT_CONTEXT_NULL
    model = _fake.build_model(str(path), device)
    if isinstance(model, int):
        return 0, model
    model_id = next(s.model_ids)
    s.models[model_id] = model
    return model_id, ACL_SUCCESS


def unload(model_id: int) -> int:
    record("mdl.unload")
    s = _fake.state()
    if model_id not in s.models:
        return ACL_ERROR_INVALID_MODEL_ID
    del s.models[model_id]
    return ACL_SUCCESS


def create_desc() -> int:
    record("mdl.create_desc")
    s = _fake.state()
    desc = next(s.handles)
    s.descs[desc] = None
    return desc


def destroy_desc(desc: int) -> int:
    record("mdl.destroy_desc")
    s = _fake.state()
    if desc not in s.descs:
        return ACL_ERROR_INVALID_PARAM
    del s.descs[desc]
    return ACL_SUCCESS


def get_desc(desc: int, model_id: int) -> int:
    record("mdl.get_desc")
    s = _fake.state()
    if desc not in s.descs:
        return ACL_ERROR_INVALID_PARAM
    if model_id not in s.models:
        return ACL_ERROR_INVALID_MODEL_ID
    s.descs[desc] = model_id
    return ACL_SUCCESS


def _model_of(desc: int) -> Model | None:
    s = _fake.state()
    model_id = s.descs.get(desc)
    return s.models.get(model_id) if model_id is not None else None


def _described(desc: int, index: int, outputs: bool) -> tuple[Model, int] | None:
    model = _model_of(desc)
    tensors = (model.outputs if outputs else model.inputs) if model else []
    if model is None or not 0 <= index < len(tensors):
        return None
    return model, index


def get_num_inputs(desc: int) -> int:
    record("mdl.get_num_inputs")
    model = _model_of(desc)
    return len(model.inputs) if model else 0


def get_num_outputs(desc: int) -> int:
    record("mdl.get_num_outputs")
    model = _model_of(desc)
    return len(model.outputs) if model else 0


def _size(shape: list[int], itemsize: int) -> int:
    return int(np.prod(shape, dtype=np.int64)) * itemsize if shape else itemsize


def get_input_size_by_index(desc: int, index: int) -> int:
    record("mdl.get_input_size_by_index")
    found = _described(desc, index, outputs=False)
    if found is None:
        return 0
    model, i = found
    return _size(model.input_shape(i, None), model.inputs[i].itemsize)


def get_output_size_by_index(desc: int, index: int) -> int:
    record("mdl.get_output_size_by_index")
    found = _described(desc, index, outputs=True)
    if found is None:
        return 0
    model, i = found
    return _size(model.output_shape(i, None), model.outputs[i].itemsize)


#: The ``name`` field of the dims getters is a 128-byte buffer (ACL_MAX_TENSOR_NAME_LEN).
_MAX_DIMS_NAME = 127


def _dims(desc: int, kind: str, index: int, name: str, dims: list[int]) -> dict[str, Any]:
    """The dims dict; a name too long for its buffer is replaced as model_desc.c does."""
    if len(name) > _MAX_DIMS_NAME:
        name = f"acl_modelId_{_fake.state().descs.get(desc)}_{kind}_{index}"
    return {"name": name, "dimCount": len(dims), "dims": list(dims)}


def get_input_dims(desc: int, index: int) -> tuple[dict[str, Any], int]:
    record("mdl.get_input_dims")
    found = _described(desc, index, outputs=False)
    if found is None:
        return {}, ACL_ERROR_INVALID_PARAM
    model, i = found
    # -1 only here, in input dims, on the batch axis of a dynamic-batch OM.
    return _dims(desc, "input", i, model.inputs[i].name, model.inputs[i].dims), ACL_SUCCESS


def get_output_dims(desc: int, index: int) -> tuple[dict[str, Any], int]:
    record("mdl.get_output_dims")
    found = _described(desc, index, outputs=True)
    if found is None:
        return {}, ACL_ERROR_INVALID_PARAM
    model, i = found
    # Output dims never hold -1: a dynamic-batch OM reports its largest gear.
    return _dims(desc, "output", i, model.outputs[i].name, model.output_shape(i, None)), ACL_SUCCESS


def get_cur_output_dims(desc: int, index: int) -> tuple[dict[str, Any], int]:
    record("mdl.get_cur_output_dims")
    found = _described(desc, index, outputs=True)
    if found is None:
        return {}, ACL_ERROR_INVALID_PARAM
    model, i = found
    # The gear of the last execute; the largest gear before any (or when none was set).
    shapes = model.last_output_shapes
    dims = shapes[i] if shapes else model.output_shape(i, None)
    return _dims(desc, "output", i, model.outputs[i].name, dims), ACL_SUCCESS


def get_input_name_by_index(desc: int, index: int) -> str:
    record("mdl.get_input_name_by_index")
    found = _described(desc, index, outputs=False)
    return found[0].inputs[index].name if found else ""


def get_output_name_by_index(desc: int, index: int) -> str:
    """The full name stored in the OM (``<op>:<index>:<ONNX name>``), never shortened."""
    record("mdl.get_output_name_by_index")
    found = _described(desc, index, outputs=True)
    return found[0].outputs[index].name if found else ""


def get_input_data_type(desc: int, index: int) -> int:
    record("mdl.get_input_data_type")
    found = _described(desc, index, outputs=False)
    return found[0].inputs[index].dtype if found else -1


def get_output_data_type(desc: int, index: int) -> int:
    record("mdl.get_output_data_type")
    found = _described(desc, index, outputs=True)
    return found[0].outputs[index].dtype if found else -1


def get_input_format(desc: int, index: int) -> int:
    record("mdl.get_input_format")
    found = _described(desc, index, outputs=False)
    return found[0].inputs[index].format if found else -1


def get_output_format(desc: int, index: int) -> int:
    record("mdl.get_output_format")
    found = _described(desc, index, outputs=True)
    return found[0].outputs[index].format if found else -1


def get_input_index_by_name(desc: int, name: str) -> tuple[int, int]:
    record("mdl.get_input_index_by_name")
    model = _model_of(desc)
    names = [t.name for t in model.inputs] if model else []
    if name not in names:
        return 0, ACL_ERROR_INVALID_PARAM
    return names.index(name), ACL_SUCCESS


def get_dynamic_batch(desc: int) -> tuple[dict[str, Any], int]:
    record("mdl.get_dynamic_batch")
    model = _model_of(desc)
    if model is None:
        return {}, ACL_ERROR_INVALID_PARAM
    return {"batchCount": len(model.gears), "batch": list(model.gears)}, ACL_SUCCESS


def set_dynamic_batch_size(model_id: int, dataset: int, index: int, batch: int) -> int:
    record("mdl.set_dynamic_batch_size")
    s = _fake.state()
    model = s.models.get(model_id)
    if model is None:
        return ACL_ERROR_INVALID_MODEL_ID
    if not model.gears:
        return ACL_ERROR_MODEL_NOT_DYNAMIC
    if dataset not in s.datasets or model.inputs[index].name != MBATCH_INPUT:
        return ACL_ERROR_INVALID_PARAM
    if batch not in model.gears:
        return ACL_ERROR_INVALID_PARAM
    s.dataset_batch[dataset] = batch
    return ACL_SUCCESS


# --------------------------------------------------------------------------- datasets


def create_dataset() -> int:
    record("mdl.create_dataset")
    s = _fake.state()
    ds = next(s.handles)
    s.datasets[ds] = []
    return ds


def add_dataset_buffer(dataset: int, data_buffer: int) -> tuple[int, int]:
    record("mdl.add_dataset_buffer")
    s = _fake.state()
    if dataset not in s.datasets or data_buffer not in s.data_buffers:
        return dataset, ACL_ERROR_INVALID_PARAM
    s.datasets[dataset].append(data_buffer)
    return dataset, ACL_SUCCESS


def get_dataset_num_buffers(dataset: int) -> int:
    record("mdl.get_dataset_num_buffers")
    return len(_fake.state().datasets.get(dataset, []))


def get_dataset_buffer(dataset: int, index: int) -> int:
    record("mdl.get_dataset_buffer")
    buffers = _fake.state().datasets.get(dataset, [])
    return buffers[index] if 0 <= index < len(buffers) else 0


def destroy_dataset(dataset: int) -> int:
    record("mdl.destroy_dataset")
    s = _fake.state()
    if dataset not in s.datasets:
        return ACL_ERROR_INVALID_PARAM
    del s.datasets[dataset]
    s.dataset_batch.pop(dataset, None)
    return ACL_SUCCESS


# --------------------------------------------------------------------------- execute


def _buffer_region(data_buffer: int, need: int) -> memoryview | None:
    s = _fake.state()
    held = s.data_buffers.get(data_buffer)
    if held is None:
        return None
    ptr, size = held
    found = s.locate(ptr)
    if found is None or size < need:
        return None
    space, view, offset = found
    if space != "device" or offset + need > view.nbytes:
        return None
    return view[offset : offset + size]


def execute(model_id: int, inputs: int, outputs: int) -> int:
    record("mdl.execute")
    s = _fake.state()
    if not s.initialized:
        return ACL_ERROR_UNINITIALIZE
    model = s.models.get(model_id)
    if model is None:
        return ACL_ERROR_INVALID_MODEL_ID
    if _context_device() != model.device:
        return ACL_ERROR_RT_CONTEXT_NULL  # no context of the model's device on this thread
    in_buffers = s.datasets.get(inputs)
    out_buffers = s.datasets.get(outputs)
    if in_buffers is None or len(in_buffers) != len(model.inputs):
        return ACL_ERROR_MODEL_INPUT_NOT_MATCH
    if out_buffers is None or len(out_buffers) != len(model.outputs):
        return ACL_ERROR_MODEL_OUTPUT_NOT_MATCH
    # No set_dynamic_batch_size on this dataset: the largest gear runs (not an error).
    batch = s.dataset_batch.get(inputs, max(model.gears) if model.gears else None)

    feeds: dict[str, np.ndarray] = {}
    for i, tensor in enumerate(model.inputs):
        shape = model.input_shape(i, batch)
        need = int(np.prod(shape, dtype=np.int64)) * tensor.itemsize if shape else tensor.itemsize
        region = _buffer_region(in_buffers[i], need)
        if region is None:
            return ACL_ERROR_MODEL_INPUT_NOT_MATCH
        if tensor.name == MBATCH_INPUT:
            continue
        dtype = ACL_TO_NUMPY[tensor.dtype]
        feeds[tensor.name] = np.frombuffer(bytes(region[:need]), dtype=dtype).reshape(shape)

    results = _fake.compute(model, feeds)
    for i, (tensor, array) in enumerate(zip(model.outputs, results, strict=True)):
        array = np.ascontiguousarray(array, dtype=ACL_TO_NUMPY[tensor.dtype])
        region = _buffer_region(out_buffers[i], array.nbytes)
        if region is None:
            return ACL_ERROR_MODEL_OUTPUT_NOT_MATCH
        region[: array.nbytes] = array.tobytes()
    model.last_output_shapes = [list(r.shape) for r in results]
    return ACL_SUCCESS
