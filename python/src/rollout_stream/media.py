"""Cutting media fields (images, audio features) back into per-message segments."""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from .codec import JaggedArray, ROW_SHAPES_SUFFIX


def row_values(field: Any, row: int) -> Any:
    """Row ``row`` of a jagged field (numpy :class:`JaggedArray` or torch nested)."""
    if isinstance(field, JaggedArray):
        return field.row(row)
    return field.unbind()[row]


def media_segments(fields: Mapping[str, Any], tags: Sequence[Mapping[str, Any]], name: str, row: int) -> list[Any]:
    """The segments of media field ``name`` in row ``row``, in their original shapes.

    A media field is jagged, its rows concatenated along dim 0; the row's
    ``<name>__row_shapes`` tag lists each segment's true shape. Works whether
    the field's inner shape holds the common trailing dims or is ``[]``
    (segments of differing trailing dims, flattened): the row is flattened
    and cut by element counts either way.

    Raises:
        ValueError: The shapes do not add up to the row's elements.
        KeyError: The row has no ``<name>__row_shapes`` tag.
    """
    shapes = tags[row][f"{name}{ROW_SHAPES_SUFFIX}"]
    flat = row_values(fields[name], row).reshape(-1)
    sizes = [math.prod(s) for s in shapes]
    if sum(sizes) != flat.shape[0]:
        raise ValueError(f"{name} row {row}: row shapes {shapes} hold {sum(sizes)} elements, the row has {flat.shape[0]}")
    out, start = [], 0
    for shape, size in zip(shapes, sizes):
        out.append(flat[start : start + size].reshape(tuple(shape)))
        start += size
    return out
