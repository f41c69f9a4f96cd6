"""Caps on one inference request, and the running tally that enforces them.

A request is checked against the caps *before* big arrays exist wherever the size is known
early (a ``shape`` next to base64 data, a .npy header, an image's target shape, the length
of nested lists), so a hostile request costs a few comparisons, not gigabytes. Each input's
real size is added afterwards, which also covers the forms that cannot be sized early.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from model_store.inference.errors import InferenceInputError
from model_store.text import say

MIB = 1024 * 1024


@dataclass(frozen=True)
class Limits:
    """What one request may hold.

    Attributes:
        max_elements: Tensor elements, summed over all inputs.
        max_bytes: Decoded tensor bytes, summed over all inputs (string inputs count their
            bytes); also bounds each base64 payload before it is decoded.
        max_image_pixels: Width x height of one image file, read from its header.
        max_image_bytes: Size of one encoded image file.
        max_image_memory: Memory one image may take while it is decoded and converted to
            RGB, estimated from its header (pixels x channels x sample size, plus the copies
            the conversion makes).
        max_string_bytes: Size of one element of a string (BYTES) input.
    """

    max_elements: int = 4_000_000
    max_bytes: int = 32 * MIB
    max_image_pixels: int = 40_000_000
    max_image_bytes: int = 20 * MIB
    max_image_memory: int = 256 * MIB
    max_string_bytes: int = 1 * MIB


class Budget:
    """Elements and bytes used so far by one request's inputs."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.elements = 0
        self.nbytes = 0

    @property
    def elements_left(self) -> int:
        return self.limits.max_elements - self.elements

    def check(self, name: str, elements: int, nbytes: int, *, at_least: bool = False) -> None:
        """Refuses ``name`` if it would take the request over a cap (nothing is recorded).

        Args:
            at_least: The counts are a lower bound found before the input was fully read.

        Raises:
            InferenceInputError: ``too_many_elements`` or ``too_large`` (both 413).
        """
        total = self.elements + elements
        if total > self.limits.max_elements:
            count = f"{total:,}"
            raise InferenceInputError(
                say(
                    "Input %(input)s brings the request to %(count)s elements; the limit is "
                    "%(limit)s per request. Send a smaller batch or tensor.",
                    input=repr(name),
                    count=say("at least %(count)s", count=count) if at_least else count,
                    limit=f"{self.limits.max_elements:,}",
                ),
                code="too_many_elements",
                field=name,
            )
        total = self.nbytes + nbytes
        if total > self.limits.max_bytes:
            count = f"{total:,}"
            raise InferenceInputError(
                say(
                    "Input %(input)s brings the request to %(count)s bytes of tensor data; "
                    "the limit is %(limit)s bytes (%(mib)s MiB). Send a smaller batch or tensor.",
                    input=repr(name),
                    count=say("at least %(count)s", count=count) if at_least else count,
                    limit=f"{self.limits.max_bytes:,}",
                    mib=f"{self.limits.max_bytes / MIB:g}",
                ),
                code="too_large",
                field=name,
            )

    def add(self, name: str, array: np.ndarray) -> None:
        """Checks and records a decoded input's real size."""
        nbytes = array_bytes(array)
        self.check(name, array.size, nbytes)
        self.elements += array.size
        self.nbytes += nbytes


def array_bytes(array: np.ndarray) -> int:
    """Bytes the array carries: its buffer, or the bytes of its strings for object arrays."""
    if array.dtype.kind == "O":
        return sum(len(item) for item in array.flat if isinstance(item, bytes | str))
    return int(array.nbytes)
