"""Where a failing output is wrong: its elements outside tolerance, and its NaN/Inf, counted per bin of a coarse grid.

The output is seen as a matrix, its last dimension as columns and all the others as rows: a (B, M, N) output as
(B·M, N), a 1-D output of n elements as (1, n), a scalar as (1, 1). That view is cut into at most 32 × 32 bins,
or 1 × 256 when it is a single row, so a heatmap of it shows an unguarded edge, a shifted row or a wrong tile
at a glance. Element (r, c) of an R × C view falls in bin (r·rows // R, c·cols // C): bins differ in size by at
most one row or column, and ``elements`` (computed, not stored) gives each bin's size so a viewer can show fractions.

Only a failing output gets a map, binned in a second pass (:func:`harness_tools.check.compare.compare`): passing
outputs pay nothing. The device's comparison bins the same way (``cudaopt_mismatch_map``, with the grid sent as
DeviceCheck.bins) and reports the counts in DeviceComparison.bin_mismatches and bin_nonfinite.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel, Field, field_serializer, field_validator

from harness_tools.backends.contract import BinGrid

MAX_BINS = 32  # down and across a matrix
MAX_ROW_BINS = 256  # across a single row


class MismatchMap(BaseModel):
    """Per-bin counts of a failing output (OutputComparison.mismatch_map); each list is ``rows`` lists of ``cols``.

    Stored with one line of space-separated counts per bin row (``"0 0 3 1 …"``): as nested JSON lists three
    32 × 32 maps took some 60,000 characters of an indented record, more than a client reads at once."""

    rows: int = Field(description="bins down the view (at most 32)")
    cols: int = Field(description="bins across the view (at most 32, or 256 for a single-row view)")
    view_shape: tuple[int, int] = Field(description="the output as a matrix: (product of all dimensions but the "
                                                    "last, the last); (1, n) for a 1-D output")
    mismatches: list[list[int]] = Field(description="elements outside tolerance (NaN and Inf included), per bin")
    nonfinite: list[list[int]] = Field(description="NaN or Inf where the reference is finite, per bin")

    @property
    def elements(self) -> list[list[int]]:
        """Elements per bin (from the grid: not stored)."""
        return _elements(BinGrid(view_rows=self.view_shape[0], view_cols=self.view_shape[1], rows=self.rows,
                                 cols=self.cols))

    @field_validator("mismatches", "nonfinite", mode="before")
    @classmethod
    def _rows_from_text(cls, rows: object) -> object:
        if isinstance(rows, list):
            return [[int(x) for x in row.split()] if isinstance(row, str) else row for row in rows]
        return rows

    @field_serializer("mismatches", "nonfinite")
    def _rows_as_text(self, rows: list[list[int]]) -> list[str]:
        return [" ".join(map(str, row)) for row in rows]


def bin_grid(shape: Sequence[int]) -> BinGrid:
    """The view and bins of an output of ``shape`` (module docstring)."""
    view_rows = math.prod(shape[:-1]) if shape else 1
    view_cols = shape[-1] if shape else 1
    rows = max(1, min(MAX_BINS, view_rows))
    cols = max(1, min(MAX_ROW_BINS if view_rows == 1 else MAX_BINS, view_cols))
    return BinGrid(view_rows=view_rows, view_cols=view_cols, rows=rows, cols=cols)


def from_counts(grid: BinGrid, mismatches: Sequence[Sequence[int]], nonfinite: Sequence[Sequence[int]]) -> MismatchMap:
    """The map of per-bin counts (the device's, or :class:`BinCounter`'s)."""
    return MismatchMap(rows=grid.rows, cols=grid.cols, view_shape=(grid.view_rows, grid.view_cols),
                       mismatches=[[int(x) for x in row] for row in mismatches],
                       nonfinite=[[int(x) for x in row] for row in nonfinite])


class BinCounter:
    """Adds up the bins of the flagged elements of chunks of the flat output; counters of parallel runs merge."""

    def __init__(self, grid: BinGrid):
        self.grid = grid
        self.mismatches = np.zeros((grid.rows, grid.cols), dtype=np.int64)
        self.nonfinite = np.zeros_like(self.mismatches)
        self.row_starts = np.array(_starts(grid.view_rows, grid.rows))  # the first view row of each bin row
        self.col_starts = np.array(_starts(grid.view_cols, grid.cols))

    def add(self, start: int, bad: np.ndarray, nonfinite: np.ndarray | None) -> None:
        """Count one chunk from flat index ``start``: its mask of mismatches and of NaN/Inf (None: none there)."""
        self._count(self.mismatches, start, bad)
        if nonfinite is not None:
            self._count(self.nonfinite, start, nonfinite)

    def merge(self, other: BinCounter) -> None:
        self.mismatches += other.mismatches
        self.nonfinite += other.nonfinite

    def result(self) -> MismatchMap:
        return from_counts(self.grid, self.mismatches.tolist(), self.nonfinite.tolist())

    def _count(self, into: np.ndarray, start: int, mask: np.ndarray) -> None:
        found = int(np.count_nonzero(mask))
        if found * 16 < mask.size:  # a few: bin each one (a wholly wrong output would take 15 times longer so)
            if found:
                self._count_each(into, start, mask)
            return
        pos, cols = 0, self.grid.view_cols
        while pos < mask.size:  # else sums over whole rows, and over the partial rows at the chunk's ends
            row, col = divmod(start + pos, cols)
            take = min(cols - col, mask.size - pos) if col or mask.size - pos < cols else (mask.size - pos) // cols * cols
            self._count_rows(into, row, col, mask[pos : pos + take])
            pos += take

    def _count_each(self, into: np.ndarray, start: int, mask: np.ndarray) -> None:
        g = self.grid
        index = np.flatnonzero(mask)
        index += start
        row, col = np.divmod(index, g.view_cols)
        row *= g.rows  # in place: no further temporaries
        row //= g.view_rows
        row *= g.cols
        col *= g.cols
        col //= g.view_cols
        row += col
        into += np.bincount(row, minlength=into.size).reshape(into.shape)

    def _count_rows(self, into: np.ndarray, row: int, col: int, mask: np.ndarray) -> None:
        """``mask`` from (row, col) on: part of one row, or whole rows (col 0, a multiple of the row's length)."""
        g = self.grid
        if col or mask.size < g.view_cols:  # within one row
            first, last = col * g.cols // g.view_cols, (col + mask.size - 1) * g.cols // g.view_cols
            offsets = np.concatenate(([0], self.col_starts[first + 1 : last + 1] - col))
            into[row * g.rows // g.view_rows, first : last + 1] += np.add.reduceat(mask, offsets, dtype=np.int64)
            return
        count = mask.size // g.view_cols
        per_row = np.add.reduceat(mask.reshape(count, g.view_cols), self.col_starts, axis=1, dtype=np.int64)
        first, last = row * g.rows // g.view_rows, (row + count - 1) * g.rows // g.view_rows
        offsets = np.concatenate(([0], self.row_starts[first + 1 : last + 1] - row))
        into[first : last + 1] += np.add.reduceat(per_row, offsets, axis=0)


def _elements(grid: BinGrid) -> list[list[int]]:
    down, across = _sizes(grid.view_rows, grid.rows), _sizes(grid.view_cols, grid.cols)
    return [[d * a for a in across] for d in down]


def _starts(n: int, bins: int) -> list[int]:
    """The first of 0..n-1 in each bin: i is in bin b when b·n <= i·bins < (b+1)·n."""
    return [-(-b * n // bins) for b in range(bins)]


def _sizes(n: int, bins: int) -> list[int]:
    return np.diff([*_starts(n, bins), n]).tolist()
