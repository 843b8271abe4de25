"""The fixture corpus (tests/cases/, format in tests/casefmt.py) through the linter's CLI, in process.

For every case folder:

- ``overlay-lint check input.yaml [--existing existing.yaml] [--crd dra] --format json``: the findings must be
  exactly the expected set (code, object, field, severity, and related where the case gives it) and
  the exit status must match;
- ``overlay-lint simulate input.yaml [existing.yaml] --instance-type T ... --format json``:
  ``overlays[name].status``, the offerings' ``price`` (matched by zone and capacity type),
  ``capacity[resource]``, ``allocatable[resource]`` and ``resourceSliceTemplates[driver]`` must match
  what the case expects.
  ``simulate`` has no ``--existing``: the cluster after admission is the existing objects with the
  candidates replacing those of the same name, so existing.yaml is passed as a second input after
  input.yaml (of two objects with one name the first is used, the second reported and ignored).
"""

from __future__ import annotations

import importlib
import json
import math
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

import jsonschema
import pytest

from lint import reference
from simulation.semantics import quantity
from tests import casefmt

MIN_CASES = 40
REL_TOLERANCE = 1e-9
ABS_TOLERANCE = 1e-12

CASES = casefmt.discover()
# A finding about the directory walk itself (a dangling symlink, a FIFO), not about any document: a case
# folder cannot carry it through the webhook, so tests/test_lint_inputs.py covers it. Likewise a repository's
# clusters (`cluster-discovery`: tests/test_lint_fleet.py).
WALK_ONLY_CODES = frozenset({"unreadable-input", "cluster-discovery"})
# Every `check --format json` document of the corpus must match the published schema.
OUTPUT_SCHEMA = jsonschema.Draft202012Validator(json.loads(reference.SCHEMA.read_text(encoding="utf-8")))
# And every `simulate --format json` document.
SIMULATE_SCHEMA = jsonschema.Draft202012Validator(
    json.loads(reference.SIMULATE_SCHEMA.read_text(encoding="utf-8")))


def test_corpus_is_large_enough() -> None:
    assert len(CASES) >= MIN_CASES, f"only {len(CASES)} case folders under {casefmt.CASES_DIR}"


def test_every_finding_code_has_a_positive_case() -> None:
    from simulation import findings as core_findings

    covered = {f.code for c in CASES for f in c.findings}
    missing = sorted(set(core_findings.CODES) - covered - WALK_ONLY_CODES)
    assert not missing, f"no case expects these codes: {missing}"


def _cli_main() -> Callable[[Sequence[str]], int | None]:
    try:
        cli = importlib.import_module("lint.cli")
    except ModuleNotFoundError as err:  # pragma: no cover - only while lint/cli.py is being written
        pytest.skip(f"lint.cli is not available yet: {err}")
    return cli.main  # type: ignore[no-any-return]


def _run(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, Any, str]:
    main = _cli_main()
    capsys.readouterr()
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse and friends
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    out, err = capsys.readouterr()
    try:
        document = json.loads(out)
    except json.JSONDecodeError:
        pytest.fail(
            f"`overlay-lint {' '.join(argv)}` (exit {code}) did not print JSON:\n"
            f"--- stdout ---\n{out}\n--- stderr ---\n{err}"
        )
    return int(code or 0), document, err


def _existing_args(case: casefmt.Case) -> list[str]:
    return ["--existing", str(case.existing)] if case.existing is not None else []


def _ids(cases: Sequence[casefmt.Case]) -> list[str]:
    return [c.name for c in cases]


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_check(case: casefmt.Case, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["check", str(case.input), *_existing_args(case), *case.options, "--format", "json"]
    code, document, err = _run(capsys, argv)
    assert isinstance(document, dict) and isinstance(document.get("findings"), list), document
    OUTPUT_SCHEMA.validate(document)
    actual = [casefmt.ActualFinding.from_json(f) for f in document["findings"]]
    missing, unexpected = case.unmatched(actual)
    problems = []
    if missing:
        problems.append("missing:\n  " + "\n  ".join(e.describe() for e in missing))
    if unexpected:
        problems.append("unexpected:\n  " + "\n  ".join(a.describe() for a in unexpected))
    if code != case.exit:
        problems.append(f"exit status {code}, expected {case.exit}")
    if problems:
        messages = "\n  ".join(
            f"{f.get('code')} {f.get('field')}: {f.get('message')}" for f in document["findings"]
        )
        pytest.fail(
            f"{case.name}: {case.description}\n"
            + "\n".join(problems)
            + f"\nall findings:\n  {messages}\nstderr:\n{err}",
            pytrace=False,
        )


SIMULATED = [c for c in CASES if c.simulates]


def _close(actual: Any, expected: float) -> bool:
    return (
        isinstance(actual, (int, float))
        and not isinstance(actual, bool)
        and math.isclose(float(actual), expected, rel_tol=REL_TOLERANCE, abs_tol=ABS_TOLERANCE)
    )


def _same_quantity(actual: Any, expected: str) -> bool:
    try:
        return quantity.parse(str(actual)) == quantity.parse(expected)
    except (ValueError, ArithmeticError):
        return False


@pytest.mark.parametrize("case", SIMULATED, ids=_ids(SIMULATED))
def test_simulate(case: casefmt.Case, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["simulate", str(case.input), *([str(case.existing)] if case.existing is not None else [])]
    for name in case.instance_types:
        argv += ["--instance-type", name]
    argv += [*case.options, "--format", "json"]
    code, document, err = _run(capsys, argv)
    # 1 only says the input had problems (reported on stderr); the simulation is still printed.
    assert code in (0, 1), f"`overlay-lint {' '.join(argv)}` exited {code}:\n{err}"
    SIMULATE_SCHEMA.validate(document)
    pools = document.get("nodepools") or {}
    problems = [
        *_status_problems(case, document.get("overlays") or {}),
        *_price_problems(case, pools),
        *_capacity_problems(case.capacity, pools, "capacity"),
        *_capacity_problems(case.allocatable, pools, "allocatable"),
        *_template_problems(case, pools),
    ]
    if problems:
        pytest.fail(f"{case.name}: {case.description}\n  " + "\n  ".join(problems), pytrace=False)


def _status_problems(case: casefmt.Case, overlays: dict[str, Any]) -> list[str]:
    problems = []
    for name, want in sorted(case.status.items()):
        got = (overlays.get(name) or {}).get("status")
        if got != want:
            problems.append(
                f"overlay {name}: status {got!r}, expected {want!r} "
                f"({(overlays.get(name) or {}).get('reason', '')})"
            )
    return problems


def _cell(pools: dict[str, Any], pool: str, instance_type: str) -> dict[str, Any] | None:
    found = (pools.get(pool) or {}).get(instance_type)
    return found if isinstance(found, dict) else None


def _price_problems(case: casefmt.Case, pools: dict[str, Any]) -> list[str]:
    problems = []
    for p in case.prices:
        where = f"{p.nodepool}/{p.instance_type} {p.zone}/{p.capacity_type}"
        c = _cell(pools, p.nodepool, p.instance_type)
        if c is None:
            problems.append(f"price {where}: no such cell in the simulation")
            continue
        offers = [
            o
            for o in c.get("offerings") or ()
            if o.get("zone") == p.zone and o.get("capacityType") == p.capacity_type
        ]
        if len(offers) != 1:
            problems.append(f"price {where}: {len(offers)} matching offerings")
        elif not _close(offers[0].get("price"), p.price):
            problems.append(
                f"price {where}: {offers[0].get('price')!r} (overlay "
                f"{offers[0].get('priceOverlay')}), expected {p.price!r}"
            )
        elif p.launchable is not None and offers[0].get("launchable") is not p.launchable:
            problems.append(f"price {where}: launchable {offers[0].get('launchable')!r}, expected {p.launchable!r}")
    return problems


def _capacity_problems(rows: Sequence[casefmt.ExpectedCapacity], pools: dict[str, Any], key: str) -> list[str]:
    """`key`: the cell's map the rows describe (capacity, or allocatable)."""
    problems = []
    for q in rows:
        where = f"{q.nodepool}/{q.instance_type} {q.resource}"
        c = _cell(pools, q.nodepool, q.instance_type)
        if c is None:
            problems.append(f"{key} {where}: no such cell in the simulation")
            continue
        figures = c.get(key) or {}
        if q.quantity is None:
            if q.resource in figures:
                problems.append(f"{key} {where}: {figures[q.resource]!r}, expected absent")
        elif q.resource not in figures:
            problems.append(f"{key} {where}: absent, expected {q.quantity!r}")
        elif not _same_quantity(figures[q.resource], q.quantity):
            problems.append(
                f"{key} {where}: {figures[q.resource]!r} (overlay "
                f"{(c.get('capacityOverlays') or {}).get(q.resource)}), expected {q.quantity!r}"
            )
    return problems


def _template_problems(case: casefmt.Case, pools: dict[str, Any]) -> list[str]:
    problems = []
    for t in case.templates:
        where = f"{t.nodepool}/{t.instance_type} driver {t.driver}"
        c = _cell(pools, t.nodepool, t.instance_type)
        if c is None:
            problems.append(f"resourceSliceTemplates {where}: no such cell in the simulation")
            continue
        got = (c.get("resourceSliceTemplates") or {}).get(t.driver)
        if got != t.overlay:
            problems.append(f"resourceSliceTemplates {where}: {got!r}, expected {t.overlay!r}")
    return problems


def test_quantities_compare_exactly() -> None:
    # The capacity comparison is by value, in Kubernetes' grammar.
    assert _same_quantity("2Gi", "2147483648")
    assert not _same_quantity("2G", "2Gi")
    assert quantity.parse("100Mi") == Decimal(100 * 2**20)
