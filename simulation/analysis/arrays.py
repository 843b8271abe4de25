"""numpy helpers for the index's big-int masks: a crowd of thousands of alike overlays is taken as arrays
in a few steps, not a Python step per overlay (numpy: the well-kept library for whole-array work; see
docs/design.md). No rule lives here."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

Ints = npt.NDArray[np.int64]
Words = npt.NDArray[np.uint64]
Objects = npt.NDArray[np.object_]


def words(bits: int, count: int) -> Words:
    """A non-negative int below 2**(64 * count) as `count` little-endian 64-bit words."""
    return np.frombuffer(bits.to_bytes(count * 8, "little"), dtype="<u8").astype(np.uint64)


def ones(bits: int, width: int) -> Ints:
    """The indices of the set bits of an int below 2**width, ascending."""
    raw = np.frombuffer(bits.to_bytes(-(-width // 8), "little"), dtype=np.uint8)
    # nonzero() of the unpacked bytes read as booleans: numpy's fast path, ten times flatnonzero's on bytes.
    return np.unpackbits(raw, bitorder="little").view(np.bool_).nonzero()[0].astype(np.int64, copy=False)


def objects(values: Sequence[object]) -> Objects:
    """The values as a read-only array of references (np.array would make a row of any sequence among them)."""
    out = np.empty(len(values), dtype=object)
    out[:] = values
    frozen(out)
    return out


def frozen(*arrays: npt.NDArray[Any]) -> None:
    """Mark arrays of a prepared snapshot read-only: shared by every request, written by none."""
    for array in arrays:
        array.flags.writeable = False
