"""The prepared entries grouped by kind: overlays of one weight that set the same fields on the same
cells, and that Karpenter's conflict test reads alike. A crowd of copies (a thousand overlays with
one spec under a thousand names) is one kind, so a walk over the overlays that meet a change tests
each kind once and takes its members as one mask, not a Python step per overlay.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Iterator, Mapping, Sequence

from simulation import once
from simulation.analysis import arrays
from simulation.semantics import merge

# Up to this many positions, Kinds.firsts groups them without numpy.
FEW = 32


@dataclasses.dataclass(frozen=True)
class Kinds:
    """Positions (in Karpenter's order) grouped by kind: per position its kind, and the mask of the
    positions of each kind with several (a mask per lone overlay would cost a big int per position)."""

    of: tuple[int, ...] = ()
    crowds: Mapping[int, int] = dataclasses.field(default_factory=dict)
    # The entries' canonical `tested` objects (merge.share_tested), for a request's candidates to adopt.
    signatures: Mapping[merge.Signature, merge.Signature] = dataclasses.field(default_factory=dict)

    @once.Once
    def of_array(self) -> arrays.Ints:
        """`of` as an array, made on first need (a crowd's)."""
        return arrays.ints(self.of)

    @classmethod
    def build(cls, order: Sequence[merge.Entry]) -> Kinds:
        signatures = merge.share_tested(order)
        found: dict[tuple[object, ...], int] = {}
        of = [found.setdefault(_key(e), len(found)) for e in order]
        crowds: dict[int, int] = {}
        for kind, count in collections.Counter(of).items():
            if count > 1:
                crowds[kind] = 0
        for position, kind in enumerate(of):
            if kind in crowds:
                crowds[kind] |= 1 << position
        return cls(tuple(of), crowds, signatures)

    def within(self, mask: int) -> Iterator[tuple[int, int]]:
        """(position of its first member, its members in `mask`) for each kind with a member in `mask`."""
        while mask:
            first = (mask & -mask).bit_length() - 1
            crowd = self.crowds.get(self.of[first])
            members = crowd & mask if crowd is not None else 1 << first
            yield first, members
            mask &= ~members

    def firsts(self, positions: Sequence[int] | arrays.Ints, rank: Sequence[int] | arrays.Ints,
               limit: int) -> list[tuple[list[int], int]]:
        """`positions` by kind, in the order each kind first appears in them: per kind its first `limit`
        positions by `rank` and how many it has. In numpy when they are many (a crowd puts thousands of one kind
        here; `rank` is best an array then); a few are grouped one by one, which costs less than numpy's calls
        (and, given `rank` as a plain sequence, in a run that asks nothing else of numpy, its import)."""
        if len(positions) <= FEW:
            groups: dict[int, list[int]] = {}
            for p in positions if isinstance(positions, Sequence) else positions.tolist():
                groups.setdefault(self.of[p], []).append(p)
            return [(sorted(group, key=rank.__getitem__)[:limit], len(group)) for group in groups.values()]
        import numpy as np  # a crowd's (arrays.py)

        rank = np.asarray(rank, dtype=np.int64)
        at = np.asarray(positions, dtype=np.int64)
        kinds = self.of_array[at]
        by = np.lexsort((rank[at], kinds))
        at, kinds = at[by], kinds[by]
        bounds = np.concatenate(([0], np.flatnonzero(kinds[1:] != kinds[:-1]) + 1, [at.size])).tolist()
        starts = bounds[:-1]
        appear = np.minimum.reduceat(by, starts)
        out = []
        for g in np.argsort(appear, kind="stable").tolist():
            lo, hi = starts[g], bounds[g + 1]
            out.append((at[lo:min(hi, lo + limit)].tolist(), hi - lo))
        return out


def alike(a: merge.Entry, b: merge.Entry) -> bool:
    """Whether the two are one overlay of one kind: an edit Karpenter's loop and the guard's clashes cannot
    tell from the stored version (a change of labels or annotations)."""
    return a.name == b.name and _key(a) == _key(b)


def _key(e: merge.Entry) -> tuple[object, ...]:
    return (e.overlay.weight, e.tested, tuple(e.fields()))

