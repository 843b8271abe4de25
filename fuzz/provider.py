"""Structured values drawn from fuzz bytes: the same bytes always give the same value, so a
crashing input replays, and libFuzzer's byte mutations become changes of shape and value."""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from typing import Any

Path = tuple[str | int, ...]

# Strings that mean something somewhere in the input: kinds, API groups, operators, YAML 1.1
# booleans, quantities, prices, label keys. Random text alone would rarely reach past a check.
WORDS = (
    "NodeOverlay", "NodePool", "InstanceType", "List", "NodeOverlayList", "karpenter.sh/v1alpha1",
    "karpenter.sh/v1", "v1", "In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", "Lte", "on", "off",
    "yes", "no", "y", "true", "~", "null", "1", "-1", "0", "1.5", "1e3", "1Gi", "100m", "-100%", "+10%", "-10",
    "+1.5", "spot", "on-demand", "reserved", "karpenter.sh/capacity-type", "karpenter.sh/nodepool",
    "kubernetes.io/hostname", "node.kubernetes.io/instance-type", "topology.kubernetes.io/zone",
    "karpenter.k8s.aws/instance-family", "example.com/team", "nvidia.com/gpu", "gpu.nvidia.com", "p5", "m5",
    "us-east-1a", "a", "", " ", "*", "\u00e9", "\U0001f600", "x" * 300, "9" * 40, "<<", "&a", "*a",
)
MAX_DEPTH = 6


class Bytes:
    """Reads fuzz input front to back; past the end every read returns its smallest value."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.at = 0

    def byte(self) -> int:
        if self.at >= len(self.data):
            return 0
        self.at += 1
        return self.data[self.at - 1]

    def below(self, n: int) -> int:
        """An integer in [0, n)."""
        if n <= 1:
            return 0
        value = 0
        for _ in range((n.bit_length() + 7) // 8):
            value = (value << 8) | self.byte()
        return value % n

    def flag(self) -> bool:
        return bool(self.byte() & 1)

    def pick(self, choices: Sequence[Any]) -> Any:
        return choices[self.below(len(choices))]

    def text(self, limit: int = 40) -> str:
        size = self.below(limit + 1)
        chunk = self.data[self.at:self.at + size]
        self.at += len(chunk)
        return chunk.decode("utf-8", "replace")

    def integer(self) -> int:
        edges = (0, 1, -1, 2, 10, 100, 10_000, 10_001, 2**31, 2**63, -(2**63) - 1, 10**40)
        return edges[self.below(len(edges))] if self.flag() else self.below(1 << 16)

    def value(self, depth: int = 0) -> Any:
        """Any JSON/YAML value: scalars of every type, lists, mappings, nested."""
        kind = self.below(10 if depth < MAX_DEPTH else 6)
        if kind == 0:
            return None
        if kind == 1:
            return self.flag()
        if kind == 2:
            return self.integer()
        if kind == 3:
            return self.pick((0.5, -0.0, 1e308, float("inf"), float("-inf"), float("nan"), 1.25e-9))
        if kind in (4, 5):
            return self.pick(WORDS) if self.flag() else self.text()
        if kind in (6, 7):
            return [self.value(depth + 1) for _ in range(self.below(4))]
        return {self.key(): self.value(depth + 1) for _ in range(self.below(4))}

    def key(self) -> str:
        return self.pick(WORDS) if self.flag() else self.text(12)


def paths(obj: Any, prefix: Path = ()) -> Iterator[Path]:
    """Every path in a JSON tree, the root first."""
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from paths(v, (*prefix, i))


def mutate(obj: Any, source: Bytes, rounds: int = 3) -> Any:
    """`obj` with up to `rounds` fields replaced by any value, deleted, or added."""
    out = copy.deepcopy(obj)
    for _ in range(1 + source.below(rounds)):
        targets = list(paths(out))
        path = targets[source.below(len(targets))]
        action = source.below(4)
        if not path:
            out = source.value() if action == 0 else out
            continue
        parent = out
        for p in path[:-1]:
            parent = parent[p]
        last = path[-1]
        if action == 0 and isinstance(parent, dict):
            del parent[last]
        elif action == 1 and isinstance(parent, dict):
            parent[source.key()] = source.value()
        elif action == 1 and isinstance(parent, list):
            parent.insert(last if isinstance(last, int) else 0, source.value())
        else:
            parent[last] = source.value()
    return out
