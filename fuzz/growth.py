"""The shape whose cost grows fastest: generator parameters (how many weights, how far overlays overlap, which field,
NodePool scoping, extra requirements, zone and capacity-type splits) searched for the largest growth exponent
log(t(4N)/t(N))/log 4 of the core's whole run (CPU time, so a shared machine's waiting does not count).

`python -m fuzz.growth [--seconds S] [--n N] [--seed K]` searches at random for S seconds and prints the worst
shapes found, as JSON lines (docs/performance.md keeps the worst); `make soak` runs it. The `growth` fuzz target
(fuzz/targets.py) reads one shape from an input's bytes and fails when its exponent passes LIMIT.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import random
import sys
import time
from collections.abc import Sequence
from typing import Any

# Smallest size measured; the exponent compares it with four times as many.
N = 300
# Past this exponent at N, a shape is a defect (linear plus fixed costs stays well below it).
LIMIT = 1.5
FIELDS = ("price", "adjustment", "capacity", "distinct-capacity")
ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")
KINDS = ("on-demand", "spot")


@dataclasses.dataclass(frozen=True)
class Shape:
    """A family of overlay sets, one per size: overlay i selects a window of `width` instance families starting at
    i * stride, at weight 1 + i % weights, setting `field`; optionally scoped to one of `pools` NodePools, split by
    zone and capacity type, and given `extra` NotIn requirements."""

    weights: int = 1
    width: int = 1
    stride: int = 0
    pools: int = 1
    scoped: bool = False
    field: str = "price"
    extra: int = 0
    split: bool = False

    @classmethod
    def from_bytes(cls, data: bytes) -> Shape:
        """A shape from a fuzzer's bytes (short inputs read as zeros)."""
        b = data.ljust(8, b"\0")
        return cls(weights=1 + b[0] * 40, width=1 + b[1] % 12, stride=b[2] % 5, pools=1 + b[3] % 20,
                   scoped=bool(b[4] & 1), field=FIELDS[b[5] % len(FIELDS)], extra=b[6] % 40, split=bool(b[7] & 1))

    @classmethod
    def drawn(cls, rng: random.Random) -> Shape:
        return cls.from_bytes(bytes(rng.randrange(256) for _ in range(8)))

    def documents(self, n: int, families: Sequence[str]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = [
            {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": f"pool-{p:03d}"},
             "spec": {"template": {"metadata": {"labels": {"team": f"t{p}"}}}}} for p in range(self.pools)]
        for i in range(n):
            start = i * self.stride
            reqs: list[dict[str, Any]] = [
                {"key": "karpenter.k8s.aws/instance-family", "operator": "In",
                 "values": [families[(start + k) % len(families)] for k in range(self.width)]}]
            if self.scoped:
                reqs.append({"key": "karpenter.sh/nodepool", "operator": "In",
                             "values": [f"pool-{i % self.pools:03d}"]})
            if self.split:
                reqs.append({"key": "topology.kubernetes.io/zone", "operator": "In", "values": [ZONES[i % 3]]})
                reqs.append({"key": "karpenter.sh/capacity-type", "operator": "In", "values": [KINDS[i // 3 % 2]]})
            reqs += [{"key": "karpenter.k8s.aws/instance-family", "operator": "NotIn",
                      "values": [families[(start + self.width + k) % len(families)]]} for k in range(self.extra)]
            spec: dict[str, Any] = {"requirements": reqs, "weight": 1 + i % min(self.weights, 10_000)}
            if self.field == "price":
                spec["price"] = f"{0.001 * (1 + i % 997):.3f}"
            elif self.field == "adjustment":
                spec["priceAdjustment"] = f"-{1 + i % 50}%"
            else:
                resource = f"example.com/r{i}" if self.field == "distinct-capacity" else "example.com/r"
                spec["capacity"] = {resource: str(1 + i % 8)}
            out.append({"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay",
                        "metadata": {"name": f"o-{i:05d}"}, "spec": spec})
        return out


def _families() -> list[str]:
    from simulation.semantics import catalog as cat

    return sorted({t.labels["karpenter.k8s.aws/instance-family"] for t in cat.default().types})


def cost(shape: Shape, n: int) -> float:
    """CPU seconds of the core's whole run over the shape at `n` overlays (checks, merge and findings)."""
    from simulation import evaluate as ev
    from simulation.semantics import catalog as cat

    docs = [ev.Document(d, i) for i, d in enumerate(shape.documents(n, _families()))]
    empty = ev.prepare([], cat.default())
    started = time.process_time()
    ev.evaluate(docs, empty)
    return time.process_time() - started


def exponent(shape: Shape, n: int = N) -> float:
    return math.log(max(cost(shape, 4 * n), 1e-6) / max(cost(shape, n), 1e-6)) / math.log(4)


def search(seconds: float, n: int = N, seed: int = 0, keep: int = 5) -> list[tuple[float, Shape]]:
    """Shapes drawn at random for `seconds`, the `keep` fastest-growing first."""
    rng = random.Random(seed)
    found: list[tuple[float, Shape]] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline or not found:
        shape = Shape.drawn(rng)
        found.append((exponent(shape, n), shape))
        found = sorted(found, key=lambda pair: -pair[0])[:keep]
    return found


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m fuzz.growth", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=300)
    parser.add_argument("--n", type=int, default=N)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    worst = search(args.seconds, args.n, args.seed)
    for value, shape in worst:
        print(json.dumps({"exponent": round(value, 3), "n": args.n, "shape": dataclasses.asdict(shape)}), flush=True)
    return 1 if worst and worst[0][0] > LIMIT else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
