"""Table-driven fixture cases: one folder per case under ``tests/cases/``, found by scanning.

A case encodes one scenario of Karpenter's NodeOverlay behaviour (most are transcribed from
Karpenter's own tests, ``pkg/controllers/nodeoverlay/suite_test.go`` and ``store_test.go``) or one
check of the guard. Every front end (the ``overlay-lint`` CLI, the webhook) runs the same cases, so
this module only *loads* them; it knows nothing about how they are executed.

Folder layout
=============

``input.yaml`` (required)
    Multi-document YAML: the candidates. NodeOverlays (``karpenter.sh/v1alpha1``), NodePools
    (``karpenter.sh/v1``, context) and InstanceTypes (``karpenter.sh/v1alpha1``, the catalog; the
    "Instance Type Settings" shape, docs/design.md §4.5)::

        apiVersion: karpenter.sh/v1alpha1
        kind: InstanceType
        metadata:
          name: default-instance-type
          labels: {kubernetes.io/arch: amd64}
        spec:
          offerings:
            - karpenter.sh/capacity-type: spot
              topology.kubernetes.io/zone: test-zone-1
              karpenter.sh/price: "1.02"
          resources: {cpu: "4", memory: 4Gi, pods: "5"}

    With no InstanceType document the embedded AWS us-east-1 catalog applies; with no NodePool the
    implicit NodePool ``default`` does. The file may also be deliberately unreadable (``parse-error``).

``existing.yaml`` (optional)
    Objects already in the cluster (``overlay-lint check --existing``). Candidates replace existing
    objects of the same name (an edit); findings that involve only existing objects are not reported.
    The simulation expectations describe the cluster after admission: existing objects with the
    candidates replacing those of the same name.

``expected.yaml`` (required)::

    description: >-                     # one line; cites the upstream test it comes from
      suite_test.go "should fail when requirements overlays overlap"
    findings:                           # the EXACT set, order-insensitive ([] = no findings at all)
      - code: same-weight-conflict
        object: NodeOverlay/overlay-a   # "Kind/name"
        field: spec.price               # JSON path as the guard prints it
        related: [NodeOverlay/overlay-b]  # optional: when given, compared exactly (order-insensitive)
        severity: error                 # optional: defaults to the code's severity (docs/design.md §5)
        detail: {first: team-b}         # optional: these detail entries, exactly (others unchecked)
        witness: {nodepool: spot, instanceType: r6i.large, capacityType: spot}
                                        # optional: these witness parts (nodepool, instanceType, zone,
                                        # capacityType), exactly (others unchecked)
    status:                             # optional: overlay name -> Applied | Conflict | Invalid
      overlay-a: Conflict
      overlay-b: Applied
    prices:                             # optional: effective offering prices (float, 1e-9 relative)
      - {nodepool: default, instanceType: m5.large, zone: us-east-1a, capacityType: on-demand, price: 0.096}
      # optional `launchable: false|true`: whether the NodePool can launch the offering (simulate marks it)
    capacity:                           # optional: effective capacity; quantity null = must be absent
      - {nodepool: default, instanceType: p5.48xlarge, resource: nvidia.com/gpu, quantity: "32"}
    allocatable:                        # optional: what Karpenter schedules against (memory less hugepages)
      - {nodepool: default, instanceType: m5.xlarge, resource: memory, quantity: 10066Mi}
    resourceSliceTemplates:             # optional: which overlay's templates apply per driver; null = none
      - {nodepool: default, instanceType: p5.48xlarge, driver: gpu.nvidia.com, overlay: gpu-slices}
    region: eu-west-1                   # optional: ``--region`` (the cluster's region, as its Nodes say)
    exit: 1                             # optional: ``overlay-lint check`` exit status; by default 1 when
                                        # an expected finding has severity error, else 0
    crd: dra                            # optional: the NodeOverlay CRD every front end checks against
                                        # (``--crd dra``: the DRA-extended one); by default Karpenter's own
    allNodePools: true                  # optional: the inputs hold every NodePool (``--all-nodepools``)

A finding without ``object`` or ``field`` leaves that part unchecked; only ``parse-error`` cases
(which have no object to name) use that.

Set ``OVERLAY_GUARD_CASES`` to extra case roots (``os.pathsep``-separated) to run more folders of
this format alongside the built-in ones.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from simulation import findings as core_findings
from simulation.validation import crds
from sources import context

CASES_DIR = Path(__file__).parent / "cases"
ENV_EXTRA_ROOTS = "OVERLAY_GUARD_CASES"

INPUT = "input.yaml"
EXISTING = "existing.yaml"
EXPECTED = "expected.yaml"

STATUSES = frozenset({"Applied", "Conflict", "Invalid"})
SEVERITIES = frozenset({"error", "warning", "info"})
_FINDING_KEYS = frozenset({"code", "object", "field", "related", "severity", "detail", "witness"})
_WITNESS_KEYS = frozenset({"nodepool", "instanceType", "zone", "capacityType"})
_TOP_KEYS = frozenset(
    {"description", "findings", "status", "prices", "capacity", "allocatable", "resourceSliceTemplates", "exit",
     "region", "crd", "allNodePools"}
)
# The `crd:` a case may choose: the embedded DRA-extended CRD (a case carries no CRD file of its own).
CRDS = frozenset({"dra"})


class CaseFormatError(ValueError):
    """A case folder that does not follow the format; the message names the file."""


@dataclasses.dataclass(frozen=True)
class ExpectedFinding:
    code: str
    object: str | None
    field: str | None
    related: tuple[str, ...] | None
    severity: str
    detail: tuple[tuple[str, str], ...] = ()
    witness: tuple[tuple[str, str], ...] = ()

    def matches(self, actual: ActualFinding) -> bool:
        return (
            self.code == actual.code
            and (self.object is None or self.object == actual.object)
            and (self.field is None or self.field == actual.field)
            and (self.related is None or tuple(sorted(self.related)) == tuple(sorted(actual.related)))
            and self.severity == actual.severity
            and set(self.detail) <= set(actual.detail)
            and set(self.witness) <= set(actual.witness)
        )

    def describe(self) -> str:
        parts = [self.code, self.object or "*", self.field if self.field is not None else "*", self.severity]
        if self.related is not None:
            parts.append("related=" + ",".join(sorted(self.related)))
        parts += [f"detail.{k}={v}" for k, v in self.detail]
        parts += [f"witness.{k}={v}" for k, v in self.witness]
        return " ".join(parts)


@dataclasses.dataclass(frozen=True)
class ActualFinding:
    """A finding as a front end reports it, reduced to what a case can pin down."""

    code: str
    object: str
    field: str
    related: tuple[str, ...]
    severity: str
    detail: tuple[tuple[str, str], ...] = ()
    witness: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> ActualFinding:
        """From the JSON shape of ``overlay-lint check --format json`` (docs/design.md §5)."""
        obj = raw.get("object") or {}
        related = tuple(f"{r.get('kind')}/{r.get('name')}" for r in raw.get("related") or ())
        witness = dict(raw.get("witness") or {})
        witness.update(witness.pop("offering", None) or {})
        return cls(
            code=str(raw.get("code")),
            object=f"{obj.get('kind')}/{obj.get('name')}",
            field=str(raw.get("field", "")),
            related=related,
            severity=str(raw.get("severity")),
            detail=tuple(sorted((str(k), str(v)) for k, v in (raw.get("detail") or {}).items())),
            witness=tuple(sorted((str(k), str(v)) for k, v in witness.items())),
        )

    def describe(self) -> str:
        parts = [self.code, self.object, self.field, self.severity]
        if self.related:
            parts.append("related=" + ",".join(sorted(self.related)))
        parts += [f"detail.{k}={v}" for k, v in self.detail]
        parts += [f"witness.{k}={v}" for k, v in self.witness]
        return " ".join(parts)


@dataclasses.dataclass(frozen=True)
class ExpectedPrice:
    nodepool: str
    instance_type: str
    zone: str
    capacity_type: str
    price: float
    launchable: bool | None = None  # None: unchecked


@dataclasses.dataclass(frozen=True)
class ExpectedCapacity:
    nodepool: str
    instance_type: str
    resource: str
    quantity: str | None  # None: the resource must be absent


@dataclasses.dataclass(frozen=True)
class ExpectedTemplates:
    nodepool: str
    instance_type: str
    driver: str
    overlay: str | None  # None: no overlay's templates apply for the driver


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    path: Path
    input: Path
    existing: Path | None
    description: str
    findings: tuple[ExpectedFinding, ...]
    status: Mapping[str, str]
    prices: tuple[ExpectedPrice, ...]
    capacity: tuple[ExpectedCapacity, ...]
    templates: tuple[ExpectedTemplates, ...]
    exit: int
    allocatable: tuple[ExpectedCapacity, ...] = ()
    region: str | None = None
    # The `--crd` value every front end is given (None: the default, Karpenter's own CRD).
    crd: str | None = None
    # The inputs hold every NodePool (`--all-nodepools`; the webhook's cache always does).
    all_nodepools: bool = False

    @property
    def options(self) -> list[str]:
        """The command-line options every front end runs the case with: its region and its CRD."""
        return [*(["--region", self.region] if self.region else []), *self.crd_args,
                *(["--all-nodepools"] if self.all_nodepools else [])]

    @property
    def crd_args(self) -> list[str]:
        """The case's CRD as options of ``overlay-lint`` and ``overlay-webhook``."""
        return ["--crd", self.crd] if self.crd is not None else []

    def compiled_crd(self) -> crds.Crd | None:
        """The case's CRD as ``--crd`` reads it, for the tests that call the core (None: the default)."""
        return context.read_crd(self.crd) if self.crd is not None else None

    @property
    def instance_types(self) -> list[str]:
        """Every instance type the simulation expectations name (``simulate --instance-type``)."""
        names = [p.instance_type for p in self.prices]
        names += [c.instance_type for c in (*self.capacity, *self.allocatable)]
        names += [t.instance_type for t in self.templates]
        return sorted(set(names))

    def input_documents(self) -> list[Any]:
        """The candidate documents (raises for the deliberately unreadable ``parse-error`` input)."""
        return load_documents(self.input)

    def existing_documents(self) -> list[Any]:
        return load_documents(self.existing) if self.existing is not None else []

    @property
    def simulates(self) -> bool:
        return bool(self.status or self.prices or self.capacity or self.allocatable or self.templates)

    def unmatched(self, actual: Iterable[ActualFinding]) -> tuple[list[ExpectedFinding], list[ActualFinding]]:
        """Pair expected with actual findings one to one: (missing, unexpected)."""
        rest = list(actual)
        missing = []

        # Most specific expectations first, so a wildcard does not steal a finding an exact one needs.
        def wildcards(e: ExpectedFinding) -> tuple[bool, bool, bool]:
            return (e.object is None, e.field is None, e.related is None)

        for exp in sorted(self.findings, key=wildcards):
            hit = next((i for i, a in enumerate(rest) if exp.matches(a)), None)
            if hit is None:
                missing.append(exp)
            else:
                rest.pop(hit)
        return missing, rest


def roots() -> list[Path]:
    out = [CASES_DIR]
    for extra in os.environ.get(ENV_EXTRA_ROOTS, "").split(os.pathsep):
        if extra.strip():
            out.append(Path(extra.strip()))
    return out


def discover(case_roots: Sequence[Path] | None = None) -> list[Case]:
    """Every case folder (a directory holding ``expected.yaml``) under the roots, sorted by name."""
    found: list[Case] = []
    for root in case_roots if case_roots is not None else roots():
        if not root.is_dir():
            continue
        for expected in sorted(root.rglob(EXPECTED)):
            found.append(load(expected.parent))
    names = [c.name for c in found]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise CaseFormatError(f"case names must be unique across roots: {', '.join(dupes)}")
    return sorted(found, key=lambda c: c.name)


def _yaml() -> YAML:
    return YAML(typ="safe", pure=True)


def load_documents(path: Path) -> list[Any]:
    """Every non-empty document of a multi-document YAML file, as plain Python values."""
    with path.open(encoding="utf-8") as fh:
        return [doc for doc in _yaml().load_all(fh) if doc is not None]


def _need(cond: bool, where: Path, why: str) -> None:
    if not cond:
        raise CaseFormatError(f"{where}: {why}")


def load(folder: Path) -> Case:
    expected_path = folder / EXPECTED
    input_path = folder / INPUT
    _need(input_path.is_file(), folder, f"{INPUT} is required")
    with expected_path.open(encoding="utf-8") as fh:
        raw = _yaml().load(fh)
    _need(isinstance(raw, Mapping), expected_path, "expected a mapping")
    unknown = set(raw) - _TOP_KEYS
    _need(not unknown, expected_path, f"unknown keys {sorted(unknown)}")
    description = raw.get("description")
    _need(
        isinstance(description, str) and description.strip() != "",
        expected_path,
        "description: one line is required",
    )
    _need(isinstance(raw.get("findings"), list), expected_path, "findings: a list is required ([] for none)")
    exp_findings = tuple(_finding(f, expected_path) for f in raw["findings"])

    status = raw.get("status") or {}
    _need(isinstance(status, Mapping), expected_path, "status: a mapping of overlay name to status")
    for name, value in status.items():
        _need(value in STATUSES, expected_path, f"status[{name}]: one of {sorted(STATUSES)}")

    prices = tuple(_price(p, expected_path) for p in raw.get("prices") or ())
    capacity = tuple(_capacity(c, expected_path) for c in raw.get("capacity") or ())
    allocatable = tuple(_capacity(c, expected_path, "allocatable") for c in raw.get("allocatable") or ())
    templates = tuple(_templates(t, expected_path) for t in raw.get("resourceSliceTemplates") or ())

    default_exit = 1 if any(f.severity == "error" for f in exp_findings) else 0
    exit_code = raw.get("exit", default_exit)
    _need(exit_code in (0, 1), expected_path, "exit: 0 or 1")
    region = raw.get("region")
    _need(region is None or isinstance(region, str), expected_path, "region: a string")
    crd = raw.get("crd")
    _need(crd is None or crd in CRDS, expected_path, f"crd: one of {sorted(CRDS)} (or absent: Karpenter's own)")
    every = raw.get("allNodePools", False)
    _need(isinstance(every, bool), expected_path, "allNodePools: true or false")

    existing = folder / EXISTING
    return Case(
        name=folder.name,
        path=folder,
        input=input_path,
        existing=existing if existing.is_file() else None,
        description=" ".join(description.split()),
        findings=exp_findings,
        status=dict(status),
        prices=prices,
        capacity=capacity,
        templates=templates,
        exit=int(exit_code),
        allocatable=allocatable,
        region=region,
        crd=crd,
        all_nodepools=every,
    )


def _finding(raw: Any, where: Path) -> ExpectedFinding:
    _need(isinstance(raw, Mapping), where, f"finding {raw!r}: expected a mapping")
    unknown = set(raw) - _FINDING_KEYS
    _need(not unknown, where, f"finding {dict(raw)}: unknown keys {sorted(unknown)}")
    code = raw.get("code")
    _need(code in core_findings.CODES, where, f"finding {dict(raw)}: unknown code {code!r}")
    obj = raw.get("object")
    _need(
        obj is None or (isinstance(obj, str) and obj.count("/") >= 1),
        where,
        f"finding {dict(raw)}: object is 'Kind/name'",
    )
    field = raw.get("field")
    _need(field is None or isinstance(field, str), where, f"finding {dict(raw)}: field is a string")
    related = raw.get("related")
    _need(
        related is None or (isinstance(related, list) and all(isinstance(r, str) for r in related)),
        where,
        f"finding {dict(raw)}: related is a list of 'Kind/name'",
    )
    severity = raw.get("severity", str(core_findings.CODES[code]))
    _need(severity in SEVERITIES, where, f"finding {dict(raw)}: severity one of {sorted(SEVERITIES)}")
    detail = _strings(raw.get("detail"), where, f"finding {dict(raw)}: detail", None)
    witness = _strings(raw.get("witness"), where, f"finding {dict(raw)}: witness", _WITNESS_KEYS)
    return ExpectedFinding(code, obj, field, tuple(related) if related is not None else None, severity,
                           detail, witness)


def _strings(raw: Any, where: Path, what: str, keys: frozenset[str] | None) -> tuple[tuple[str, str], ...]:
    """An optional mapping of strings to strings (of `keys` only, when given), sorted into pairs."""
    if raw is None:
        return ()
    _need(isinstance(raw, Mapping) and all(isinstance(k, str) and isinstance(v, str) for k, v in raw.items()),
          where, f"{what} is a mapping of strings")
    unknown = set(raw) - keys if keys is not None else set()
    _need(not unknown, where, f"{what}: unknown keys {sorted(unknown)}")
    return tuple(sorted(raw.items()))


def _fields(raw: Any, where: Path, what: str, keys: Sequence[str]) -> Mapping[str, Any]:
    _need(isinstance(raw, Mapping), where, f"{what} {raw!r}: expected a mapping")
    missing = [k for k in keys if k not in raw]
    _need(not missing, where, f"{what} {dict(raw)}: missing {missing}")
    unknown = set(raw) - set(keys)
    _need(not unknown, where, f"{what} {dict(raw)}: unknown keys {sorted(unknown)}")
    mapping: Mapping[str, Any] = raw
    return mapping


def _price(raw: Any, where: Path) -> ExpectedPrice:
    keys = ("nodepool", "instanceType", "zone", "capacityType", "price")
    optional = ("launchable",) if isinstance(raw, Mapping) and "launchable" in raw else ()
    r = _fields(raw, where, "price", keys + optional)
    price = r["price"]
    _need(
        isinstance(price, (int, float)) and not isinstance(price, bool),
        where,
        f"price {dict(r)}: price is a number",
    )
    launchable = r.get("launchable")
    _need(launchable is None or isinstance(launchable, bool), where, f"price {dict(r)}: launchable is a boolean")
    return ExpectedPrice(
        str(r["nodepool"]), str(r["instanceType"]), str(r["zone"]), str(r["capacityType"]), float(price),
        launchable,
    )


def _capacity(raw: Any, where: Path, what: str = "capacity") -> ExpectedCapacity:
    r = _fields(raw, where, what, ("nodepool", "instanceType", "resource", "quantity"))
    qty = r["quantity"]
    _need(
        qty is None or isinstance(qty, (str, int)),
        where,
        f"{what} {dict(r)}: quantity is a string (or null for absent)",
    )
    return ExpectedCapacity(
        str(r["nodepool"]), str(r["instanceType"]), str(r["resource"]), None if qty is None else str(qty)
    )


def _templates(raw: Any, where: Path) -> ExpectedTemplates:
    r = _fields(raw, where, "resourceSliceTemplates", ("nodepool", "instanceType", "driver", "overlay"))
    return ExpectedTemplates(
        str(r["nodepool"]),
        str(r["instanceType"]),
        str(r["driver"]),
        None if r["overlay"] is None else str(r["overlay"]),
    )
