"""The numpy form of a jagged field (``jagged="numpy"``)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class JaggedArray:
    """A jagged field without torch: row ``i`` is ``values[offsets[i]:offsets[i+1]]``.

    Attributes:
        values: ``[total_rows_of_first_dim, *inner_shape]`` array in the trainer dtype.
        offsets: int64 array of N+1 entries, ``offsets[0] == 0``.
    """

    values: np.ndarray
    offsets: np.ndarray

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @property
    def dtype(self) -> np.dtype:
        return self.values.dtype

    @property
    def inner_shape(self) -> tuple[int, ...]:
        return tuple(self.values.shape[1:])

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def row(self, i: int) -> np.ndarray:
        return self.values[self.offsets[i] : self.offsets[i + 1]]

    def rows(self) -> list[np.ndarray]:
        return [self.row(i) for i in range(len(self))]
