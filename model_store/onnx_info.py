"""What an uploaded ONNX file is: signature, opsets, operators, size, external data.

The file is parsed as a protobuf message only; external data is never loaded.
Every external-data reference is checked instead: it must name a file that
exists inside the model's own folder (no absolute paths, no ``..``, no
symlinks that lead out), so that a crafted model cannot make a later step
read ``/etc/passwd`` or a neighbour's files.

Example:
    >>> info = inspect_onnx(Path("uploads/resnet.onnx"))
    >>> info.inputs[0].name, info.inputs[0].dims, info.default_opset
    ('input', ['batch', 3, 224, 224], 14)
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath, PureWindowsPath

import onnx
from google.protobuf.message import DecodeError
from onnx import AttributeProto, GraphProto, ModelProto, TensorProto, ValueInfoProto

from model_store.dtypes import ONNX_TO_TRITON, TRITON_TO_NUMPY
from model_store.errors import InvalidModel, MissingExternalData, UnsafeExternalData
from model_store.text import Message, say

# protobuf cannot parse messages of 2 GiB or more; bigger models keep their
# weights in external data files.
MAX_PROTOBUF_BYTES = 2**31 - 1
DEFAULT_DOMAIN = "ai.onnx"
_WHAT_TO_DO = say(
    "Export the model to ONNX again (e.g. torch.onnx.export) and upload the .onnx file."
)
# Leading bytes of files people upload by mistake, and what to tell them.
_MAGIC_HINTS: tuple[tuple[bytes, Message], ...] = (
    (b"PK\x03\x04", say("it is a ZIP archive (PyTorch .pt/.pth checkpoints are ZIP files)")),
    (b"\x89HDF\r\n\x1a\n", say("it is an HDF5 file (Keras .h5)")),
    (b"\x89PNG\r\n\x1a\n", say("it is a PNG image")),
    (b"\xff\xd8\xff", say("it is a JPEG image")),
    (b"\x1f\x8b", say("it is a gzip archive; unpack it first")),
)

Dim = int | str | None


@dataclass
class TensorInfo:
    """One graph input or output.

    Attributes:
        name: Tensor name.
        onnx_type: ONNX element type name (``"FLOAT"``), or the kind of a
            non-tensor value (``"sequence"``, ``"map"``, ``"optional"``).
        triton_type: Triton type (``"TYPE_FP32"``), or None if Triton has none.
        numpy_dtype: numpy dtype name (``"float32"``), or None if there is none.
        dims: One entry per axis: an int, a symbolic name (``"batch"``) or
            None for an unnamed unknown size. None when even the rank is unknown.
    """

    name: str
    onnx_type: str
    triton_type: str | None
    numpy_dtype: str | None
    dims: list[Dim] | None


@dataclass
class OnnxInfo:
    """What :func:`inspect_onnx` found in a model file."""

    inputs: list[TensorInfo]
    outputs: list[TensorInfo]
    ir_version: int
    opset_imports: dict[str, int]
    default_opset: int | None
    producer_name: str
    producer_version: str
    operators: dict[str, int]
    node_count: int
    parameter_count: int
    file_size: int
    sha256: str
    uses_external_data: bool = False
    external_data_files: list[str] = field(default_factory=list)
    #: The model's ``metadata_props`` as found (exporters' notes, e.g. class names); read,
    #: never run (``model_store.inference.class_names`` interprets them).
    metadata_props: dict[str, str] = field(default_factory=dict)

    def signature_dims(self) -> dict[str, list[Dim] | None]:
        """Returns full shapes by tensor name, as ``model_store.config_lint.lint`` takes them."""
        return {t.name: t.dims for t in [*self.inputs, *self.outputs]}


def inspect_onnx(path: Path) -> OnnxInfo:
    """Reads an ONNX file and describes it, without loading external data.

    Args:
        path: The ``.onnx`` file. External data files must sit in its folder.

    Returns:
        The description.

    Raises:
        InvalidModel: If the file is not a readable ONNX model.
        UnsafeExternalData: If external data points outside the model's folder.
        MissingExternalData: If an external data file is not there.
    """
    path = Path(path)
    data = _read_model_bytes(path)
    model = _parse_model(data)
    graph = model.graph
    external = _check_external_data(model, path.parent)
    initializer_names = {t.name for t in graph.initializer}
    initializer_names.update(s.values.name for s in graph.sparse_initializer)
    opsets = {(imp.domain or DEFAULT_DOMAIN): imp.version for imp in model.opset_import}
    operators, node_count = _operator_histogram(graph)
    return OnnxInfo(
        inputs=[_tensor_info(v) for v in graph.input if v.name not in initializer_names],
        outputs=[_tensor_info(v) for v in graph.output],
        ir_version=model.ir_version,
        opset_imports=opsets,
        default_opset=opsets.get(DEFAULT_DOMAIN),
        producer_name=model.producer_name,
        producer_version=model.producer_version,
        operators=operators,
        node_count=node_count,
        parameter_count=_parameter_count(graph),
        file_size=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
        uses_external_data=bool(external),
        external_data_files=external,
        metadata_props={p.key: p.value for p in model.metadata_props},
    )


# Reading -------------------------------------------------------------------------


def _read_model_bytes(path: Path) -> bytes:
    """Reads the whole file after cheap checks that give a clear message."""
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise InvalidModel(
            say(
                "The model file %(name)s cannot be read: %(error)s.",
                name=repr(path.name),
                error=exc.strerror,
            )
        ) from None
    if size == 0:
        raise InvalidModel(
            say(
                "Not an ONNX model: %(name)s is empty. %(what_to_do)s",
                name=repr(path.name),
                what_to_do=_WHAT_TO_DO,
            )
        )
    if size > MAX_PROTOBUF_BYTES:
        raise InvalidModel(
            say(
                "Not a usable ONNX model: %(name)s is %(size)s bytes, "
                "over protobuf's 2 GiB limit. "
                "Export it with its weights in external data (save_as_external_data=True).",
                name=repr(path.name),
                size=size,
            )
        )
    data = path.read_bytes()
    for magic, hint in _MAGIC_HINTS:
        if data.startswith(magic):
            raise InvalidModel(
                say(
                    "Not an ONNX model: %(hint)s. %(what_to_do)s",
                    hint=hint,
                    what_to_do=_WHAT_TO_DO,
                )
            )
    return data


def _parse_model(data: bytes) -> ModelProto:
    """Parses bytes as a ModelProto and checks it looks like a real model.

    protobuf happily parses many non-ONNX byte strings into a message with
    unknown fields, so a model must also have an IR version, an opset and a
    graph with at least one output.
    """
    model = ModelProto()
    try:
        model.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError) as exc:
        raise InvalidModel(
            say(
                "Not an ONNX model: the file cannot be decoded (%(error)s); it may be truncated "
                "or another format. %(what_to_do)s",
                error=str(exc),
                what_to_do=_WHAT_TO_DO,
            )
        ) from None
    if model.ir_version < 1 or not model.opset_import or not model.HasField("graph"):
        raise InvalidModel(
            say(
                "Not an ONNX model: the file has no IR version, opset or graph; it may be "
                "truncated or another format. %(what_to_do)s",
                what_to_do=_WHAT_TO_DO,
            )
        )
    if not model.graph.output:
        raise InvalidModel(
            say(
                "The ONNX graph has no outputs, so it cannot be served. %(what_to_do)s",
                what_to_do=_WHAT_TO_DO,
            )
        )
    return model


# Walking the graph ---------------------------------------------------------------


def _subgraphs(attr: AttributeProto) -> list[GraphProto]:
    """Graphs held by a node attribute (If/Loop/Scan bodies)."""
    return [attr.g, *attr.graphs] if attr.HasField("g") else list(attr.graphs)


def _nested_graphs(attrs: Iterable[AttributeProto]) -> Iterator[GraphProto]:
    """Yields the graphs held by ``attrs`` and every subgraph inside them, without recursion."""
    stack = [sub for attr in attrs for sub in _subgraphs(attr)]
    while stack:
        current = stack.pop()
        yield current
        for node in current.node:
            for attr in node.attribute:
                stack.extend(_subgraphs(attr))


def _all_graphs(graph: GraphProto) -> Iterator[GraphProto]:
    """Yields ``graph`` and every nested subgraph, depth first, without recursion."""
    yield graph
    yield from _nested_graphs(attr for node in graph.node for attr in node.attribute)


def _function_attributes(model: ModelProto) -> list[AttributeProto]:
    """Attributes in the model's local functions: their nodes' and their declared defaults."""
    attrs: list[AttributeProto] = []
    for function in model.functions:
        attrs.extend(function.attribute_proto)
        attrs.extend(attr for node in function.node for attr in node.attribute)
    return attrs


def _attribute_tensors(attr: AttributeProto) -> Iterator[TensorProto]:
    """Tensors stored directly in a node attribute (Constant values and the like)."""
    if attr.HasField("t"):
        yield attr.t
    yield from attr.tensors
    if attr.HasField("sparse_tensor"):
        yield from (attr.sparse_tensor.values, attr.sparse_tensor.indices)
    for sparse in attr.sparse_tensors:
        yield from (sparse.values, sparse.indices)


def _all_tensors(model: ModelProto) -> Iterator[TensorProto]:
    """Every tensor that may carry data: initializers and attributes, in graphs and functions.

    Local functions count like the main graph, down to the If/Loop/Scan bodies inside them:
    a runtime inlines them, so external data hidden there would be read all the same.
    """
    function_attrs = _function_attributes(model)
    graphs = [*_all_graphs(model.graph), *_nested_graphs(function_attrs)]
    attrs = list(function_attrs)
    for graph in graphs:
        yield from graph.initializer
        for sparse in graph.sparse_initializer:
            yield from (sparse.values, sparse.indices)
        attrs.extend(attr for node in graph.node for attr in node.attribute)
    for attr in attrs:
        yield from _attribute_tensors(attr)


def _operator_histogram(graph: GraphProto) -> tuple[dict[str, int], int]:
    """Counts nodes by operator, subgraphs included; custom domains prefix the name."""
    counts: Counter[str] = Counter()
    for sub in _all_graphs(graph):
        for node in sub.node:
            domain = node.domain if node.domain not in ("", DEFAULT_DOMAIN) else ""
            counts[f"{domain}.{node.op_type}" if domain else node.op_type] += 1
    return dict(sorted(counts.items())), sum(counts.values())


def _parameter_count(graph: GraphProto) -> int:
    """Sums the element counts of all initializers (dense shape for sparse ones)."""
    total = 0
    for sub in _all_graphs(graph):
        total += sum(math.prod(t.dims) for t in sub.initializer)
        total += sum(math.prod(s.dims) for s in sub.sparse_initializer)
    return total


def _tensor_info(value: ValueInfoProto) -> TensorInfo:
    """Describes one graph input or output."""
    kind = value.type.WhichOneof("value")
    if kind != "tensor_type":
        return TensorInfo(
            value.name, kind.removesuffix("_type") if kind else "unknown", None, None, None
        )
    tensor_type = value.type.tensor_type
    elem = tensor_type.elem_type
    onnx_type = (
        TensorProto.DataType.Name(elem) if elem in TensorProto.DataType.values() else str(elem)
    )
    triton_type = ONNX_TO_TRITON.get(elem)
    numpy_dtype = TRITON_TO_NUMPY.get(triton_type) if triton_type else None
    dims: list[Dim] | None = None
    if tensor_type.HasField("shape"):
        dims = [_dim(d) for d in tensor_type.shape.dim]
    return TensorInfo(value.name, onnx_type, triton_type, numpy_dtype, dims)


def _dim(dim: onnx.TensorShapeProto.Dimension) -> Dim:
    """An int for a fixed size, the symbol for a named one, None for an unknown one."""
    which = dim.WhichOneof("value")
    if which == "dim_value":
        return int(dim.dim_value)
    if which == "dim_param" and dim.dim_param:
        return dim.dim_param
    return None


# External data -------------------------------------------------------------------


def _external_entries(tensor: TensorProto) -> dict[str, str]:
    """The key/value pairs of a tensor's ``external_data`` field."""
    return {entry.key: entry.value for entry in tensor.external_data}


def _check_location(location: str, folder: Path, tensor_name: str) -> Path:
    """Returns the resolved data file for ``location`` if it is safely inside ``folder``."""
    where = {"tensor": repr(tensor_name), "location": repr(location)}
    fix = say("Save the model with its external data files next to the .onnx file and upload both.")
    if not location or "\x00" in location:
        raise UnsafeExternalData(
            say(
                "Tensor %(tensor)s stores its data in %(location)s, "
                "which is not a file name. %(fix)s",
                **where,
                fix=fix,
            )
        )
    if PurePosixPath(location).is_absolute() or PureWindowsPath(location).is_absolute():
        raise UnsafeExternalData(
            say(
                "Tensor %(tensor)s stores its data in %(location)s, "
                "an absolute path outside the model's folder. %(fix)s",
                **where,
                fix=fix,
            )
        )
    if ".." in PureWindowsPath(location).parts:  # splits on "/" and "\"
        raise UnsafeExternalData(
            say(
                "Tensor %(tensor)s stores its data in %(location)s, "
                "a path that climbs out of the model's folder. %(fix)s",
                **where,
                fix=fix,
            )
        )
    root = folder.resolve()
    candidate = root / location
    if not candidate.exists() and not candidate.is_symlink():
        raise MissingExternalData(
            say(
                "Tensor %(tensor)s stores its data in %(location)s, "
                "but that file is missing. Upload it together with the model.",
                **where,
            )
        )
    try:
        resolved = candidate.resolve()
    except (OSError, RuntimeError):  # a symlink loop
        raise UnsafeExternalData(
            say(
                "Tensor %(tensor)s stores its data in %(location)s, "
                "a symlink that cannot be followed. %(fix)s",
                **where,
                fix=fix,
            )
        ) from None
    if not resolved.is_relative_to(root) or resolved == root:
        raise UnsafeExternalData(
            say(
                "Tensor %(tensor)s stores its data in %(location)s, "
                "which leads outside the model's folder. %(fix)s",
                **where,
                fix=fix,
            )
        )
    if not resolved.is_file():
        raise MissingExternalData(
            say(
                "Tensor %(tensor)s stores its data in %(location)s, "
                "which is not a regular file. %(fix)s",
                **where,
                fix=fix,
            )
        )
    return resolved


def _check_bounds(entries: dict[str, str], resolved: Path, tensor_name: str) -> None:
    """Refuses offsets/lengths that point past the end of the data file (a truncated upload)."""
    try:
        offset = int(entries.get("offset", "0") or 0)
        length = int(entries["length"]) if entries.get("length") else None
    except ValueError:
        raise InvalidModel(
            say(
                "Tensor %(tensor)s has a non-numeric external data offset or length. "
                "%(what_to_do)s",
                tensor=repr(tensor_name),
                what_to_do=_WHAT_TO_DO,
            )
        ) from None
    end = offset + (length or 0)
    if offset < 0 or (length is not None and length < 0) or end > resolved.stat().st_size:
        raise InvalidModel(
            say(
                "Tensor %(tensor)s expects bytes %(offset)s..%(end)s of %(file)s, "
                "which is shorter than that; the data file may be truncated. Upload it again.",
                tensor=repr(tensor_name),
                offset=offset,
                end=end,
                file=repr(resolved.name),
            )
        )


def _check_external_data(model: ModelProto, folder: Path) -> list[str]:
    """Checks every external-data reference and returns the data file locations, sorted."""
    locations: set[str] = set()
    for tensor in _all_tensors(model):
        if tensor.data_location != TensorProto.EXTERNAL:
            continue
        entries = _external_entries(tensor)
        location = entries.get("location", "")
        resolved = _check_location(location, folder, tensor.name)
        _check_bounds(entries, resolved, tensor.name)
        locations.add(location)
    return sorted(locations)
