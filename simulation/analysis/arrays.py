"""numpy helpers for the index's big-int masks: a crowd of thousands of alike overlays is taken as arrays
in a few steps, not a Python step per overlay (numpy: the well-kept library for whole-array work; see
docs/design.md). No rule lives here. numpy is imported on the first call that needs it: a one-file check
takes none of these steps, and the import would be a fifth of its start-up (benchmarks/startup_bench.py)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Ints = npt.NDArray[np.int64]
    Words = npt.NDArray[np.uint64]
    Objects = npt.NDArray[np.object_]


def nonzero_words(bits: int, count: int, limit: int | None = None) -> list[int]:
    """The indices of the non-zero 64-bit words of a non-negative int below 2**(64 * count), ascending, the first
    `limit` of them if given: one pass over its bytes from its lowest non-zero word (whether a word is zero does
    not depend on the byte order it is read in). An instance type's offerings fill one word high in a catalog of
    thousands: the words below it are skipped in C, not read one by one."""
    if not bits:
        return []
    low = ((bits & -bits).bit_length() - 1) // 64
    raw = (bits >> 64 * low).to_bytes((count - low) * 8, "little")
    if limit is not None:
        # A broad set's dozens of words are not all read to learn that it has more than a few.
        return list(itertools.islice((low + k for k, word in enumerate(memoryview(raw).cast("Q")) if word), limit))
    return [low + k for k, word in enumerate(memoryview(raw).cast("Q")) if word]


def ones(bits: int, width: int) -> Ints:
    """The indices of the set bits of an int below 2**width, ascending."""
    import numpy as np

    # nonzero() of the unpacked bytes read as booleans: numpy's fast path, ten times flatnonzero's on bytes.
    return flags(bits, width).nonzero()[0].astype(np.int64, copy=False)


def flags(bits: int, width: int) -> npt.NDArray[np.bool_]:
    """Per index below `width` (rounded up to a byte), whether its bit is set: `of_flags`' inverse."""
    import numpy as np

    raw = np.frombuffer(bits.to_bytes(-(-width // 8), "little"), dtype=np.uint8)
    return np.unpackbits(raw, bitorder="little").view(np.bool_)


def mask(positions: Ints, width: int) -> int:
    """The int with these bits set (positions below `width`): `ones`' inverse."""
    import numpy as np

    hit = np.zeros(width, dtype=np.bool_)
    hit[positions] = True
    return of_flags(hit)


def of_flags(flags: npt.NDArray[np.bool_]) -> int:
    """The int whose bit i is flags[i]."""
    import numpy as np

    return int.from_bytes(np.packbits(flags, bitorder="little").tobytes(), "little")


def ints(values: Sequence[int]) -> Ints:
    """The values as a read-only int64 array."""
    import numpy as np

    out = np.array(values, dtype=np.int64)
    frozen(out)
    return out


def objects(values: Sequence[object]) -> Objects:
    """The values as a read-only array of references (np.array would make a row of any sequence among them)."""
    import numpy as np

    out = np.empty(len(values), dtype=object)
    out[:] = values
    frozen(out)
    return out


def ranks(order: Sequence[int]) -> Ints:
    """The inverse of a permutation: per position, its place in `order` (read-only)."""
    import numpy as np

    out = np.empty(len(order), dtype=np.int64)
    out[np.array(order, dtype=np.int64)] = np.arange(len(order), dtype=np.int64)
    frozen(out)
    return out


def below(ranks: Ints, count: int) -> int:
    """The mask of the positions whose rank is below `count`."""
    import numpy as np

    return mask(np.flatnonzero(ranks < count), len(ranks))


def changes(values: Ints) -> list[int]:
    """The indices of the values that differ from the one before them."""
    import numpy as np

    changed: list[int] = (np.flatnonzero(values[1:] != values[:-1]) + 1).tolist()
    return changed


def frozen(*arrays: npt.NDArray[Any]) -> None:
    """Mark arrays of a prepared snapshot read-only: shared by every request, written by none."""
    for array in arrays:
        array.flags.writeable = False
