"""Issue 4, scenario 10: the linter's API-server layer agrees with the real API server.

Every NodeOverlay of the test suite's fixtures is sent with `kubectl apply --dry-run=server` while
no webhook is registered, so only the CRD's schema, its CEL rules and kubectl's strict field
validation decide; the linter's verdict is whether `check_overlay` reports any finding of the
"apiserver" layer. Both must accept or both must reject.

It holds for either CRD the cluster may run: Karpenter's own (where `dynamicResources` is an unknown
field) and the project's DRA-extended one. The linter is given the CRD the API server serves, read back
from it as `overlay-lint --cluster` does, and evaluates its CEL rules with no code specific to them.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from simulation.evaluate import Document, check_overlay
from simulation.semantics import model
from simulation.validation import crds
from sources import tree

from ._cluster import REPO_ROOT, ControlPlane
from ._guard import Guard

pytestmark = pytest.mark.e2e

# One kubectl call per object is mostly process start-up (over a minute for the suite's
# fixtures); batches of documents take seconds.
BATCH = 60
WORKERS = 2
_ERROR_STARTS = ("Error from server", "error:")
_CREATED = re.compile(r"^nodeoverlay\.karpenter\.sh/(\S+) created \(server dry run\)$", re.M)
_SUFFIXES = (".yaml", ".yml", ".json")


Verdict = tuple[bool, str]


@dataclasses.dataclass(frozen=True)
class Fixture:
    where: str
    obj: dict[str, Any]

    @property
    def name(self) -> str:
        return str(model.name_of(self.obj))


def _files() -> Iterator[Path]:
    cases = REPO_ROOT / "tests" / "cases"
    for case in sorted(cases.iterdir()):
        for name in ("input.yaml", "existing.yaml"):
            if (case / name).is_file():
                yield case / name
    for root in (REPO_ROOT / "tests" / "lint_fixtures", REPO_ROOT / "examples"):
        yield from sorted(p for p in root.rglob("*") if p.suffix in _SUFFIXES and p.is_file())


def fixtures() -> list[Fixture]:
    """Every NodeOverlay document, read with the linter's own YAML reader (kubectl's YAML 1.1
    typing), List items included; unparseable documents are the parse-error fixtures."""
    out = []
    for path in _files():
        rel = path.relative_to(REPO_ROOT)
        for parsed in tree.documents(path.read_text()):
            value = parsed.value
            if parsed.problem is not None or not isinstance(value, dict):
                continue
            listed = str(value.get("kind", "")).endswith("List")
            items = value.get("items") if listed else [value]
            for i, obj in enumerate(items if isinstance(items, list) else []):
                if isinstance(obj, dict) and obj.get("kind") == model.NODEOVERLAY:
                    suffix = f" item {i}" if listed else ""
                    out.append(Fixture(f"{rel} document {parsed.index}{suffix}", obj))
    return out


def linter_verdict(obj: dict[str, Any], crd: crds.Crd) -> tuple[bool, list[str]]:
    """(rejects, the apiserver-layer findings) from the core, in process."""
    found = check_overlay(Document(obj, 0), crd).findings
    layer = [f"[{f.code}] {f.field}: {f.message}" for f in found
             if dict(f.detail).get("layer") == "apiserver"]
    return bool(layer), layer


def apiserver_verdict(plane: ControlPlane, obj: dict[str, Any]) -> Verdict:
    done = plane.kubectl("apply", "--dry-run=server", "-f", "-", input=json.dumps(obj), check=False)
    return done.returncode != 0, (done.stderr or done.stdout).strip()


def _error_blocks(stderr: str) -> list[str]:
    blocks: list[str] = []
    for line in stderr.splitlines():
        if line.startswith(_ERROR_STARTS) or not blocks:
            blocks.append(line)
        else:
            blocks[-1] += "\n" + line
    return blocks


def _batch_verdicts(plane: ControlPlane, batch: list[Fixture]) -> list[Verdict]:
    """One `kubectl apply` of a multi-document stream (names unique within it): kubectl goes on
    after a refused object, prints one line per created object and then every error in order.
    Anything it does not account for one to one is judged object by object instead."""
    stream = "\n---\n".join(json.dumps(f.obj) for f in batch)
    done = plane.kubectl("apply", "--dry-run=server", "-f", "-", input=stream, check=False)
    created = set(_CREATED.findall(done.stdout))
    refused = [f for f in batch if f.name not in created]
    errors = _error_blocks(done.stderr)
    named = [re.search(r'NodeOverlay\.karpenter\.sh "([^"]*)"', e) for e in errors]
    if (len(created) + len(refused) != len(batch) or len(errors) != len(refused)
            or any(m and m.group(1) != f.name for m, f in zip(named, refused, strict=True))):
        return [apiserver_verdict(plane, f.obj) for f in batch]
    messages = dict(zip((f.name for f in refused), errors, strict=True))
    return [(f.name in messages, messages.get(f.name, "created (server dry run)")) for f in batch]


def apiserver_verdicts(plane: ControlPlane, every: list[Fixture]) -> list[Verdict]:
    batches: list[list[int]] = []
    for i, fixture in enumerate(every):
        home = next((b for b in batches
                     if len(b) < BATCH and all(every[j].name != fixture.name for j in b)), None)
        if home is None:
            home = []
            batches.append(home)
        home.append(i)
    with ThreadPoolExecutor(WORKERS) as pool:
        answers = list(pool.map(lambda b: _batch_verdicts(plane, [every[i] for i in b]), batches))
    verdicts: dict[int, Verdict] = {}
    for batch, answer in zip(batches, answers, strict=True):
        verdicts.update(zip(batch, answer, strict=True))
    return [verdicts[i] for i in range(len(every))]


def served_crd(plane: ControlPlane) -> crds.Crd:
    """The NodeOverlay CRD the API server runs, compiled for the linter."""
    raw = json.loads(plane.kubectl("get", "crd", crds.NAME, "-o", "json").stdout)
    crd = crds.load(raw, "the served CRD")
    assert crd.unchecked() == [], "every CEL rule of the served CRD must be evaluated"
    return crd


def test_10_linter_schema_findings_agree_with_the_api_server_on_karpenter_crd(guard: Guard,
                                                                             tmp_path: Path) -> None:
    crd = served_crd(guard.plane)
    assert not crd.defines(*crds.DRA_FIELD), "Karpenter's own CRD is expected by default"
    _agreement(guard, crd, tmp_path)


@pytest.mark.usefixtures("dra_crd")
def test_10_linter_schema_findings_agree_with_the_api_server_on_dra_crd(guard: Guard, tmp_path: Path) -> None:
    crd = served_crd(guard.plane)
    assert crd.defines(*crds.DRA_FIELD)
    _agreement(guard, crd, tmp_path)


def _agreement(guard: Guard, crd: crds.Crd, tmp_path: Path) -> None:
    plane = guard.plane
    every = fixtures()
    assert len(every) > 300, f"only {len(every)} fixture overlays found"
    # An object of the same name already stored would turn the dry run into an update, which the
    # API server ratchets; the comparison is about creates.
    names = plane.kubectl("get", "nodeoverlays", "-o", "jsonpath={.items[*].metadata.name}").stdout
    stored = set(names.split())
    assert not stored & {f.name for f in every}

    with guard.unregistered():
        server = apiserver_verdicts(plane, every)
        # A disagreement is confirmed by kubectl on that object alone before it is reported.
        for i, (fixture, verdict) in enumerate(zip(every, server, strict=True)):
            if verdict[0] != linter_verdict(fixture.obj, crd)[0]:
                server[i] = apiserver_verdict(plane, fixture.obj)

    rows, disagreements = [], []
    for fixture, (server_rejects, server_says) in zip(every, server, strict=True):
        linter_rejects, linter_says = linter_verdict(fixture.obj, crd)
        row = {"fixture": fixture.where, "name": fixture.name, "apiserverRejects": server_rejects,
               "apiserver": server_says, "linterRejects": linter_rejects, "linter": linter_says}
        rows.append(row)
        if server_rejects != linter_rejects:
            disagreements.append(row)
    report = tmp_path / "schema-agreement.json"
    report.write_text(json.dumps({"objects": len(rows), "disagreements": disagreements, "all": rows},
                                 indent=1))

    rejected = sum(rejects for rejects, _ in server)
    print(f"\n{len(rows)} fixture overlays, {rejected} rejected by the API server, "
          f"{len(disagreements)} disagreements (report: {report})")
    for d in disagreements:
        print(f"--- {d['fixture']} (NodeOverlay {d['name']})\n"
              f"  API server {'rejects' if d['apiserverRejects'] else 'accepts'}: {d['apiserver']}\n"
              f"  linter {'rejects' if d['linterRejects'] else 'accepts'}: {d['linter']}")
    assert not disagreements, f"{len(disagreements)} disagreements; see the output above and {report}"
