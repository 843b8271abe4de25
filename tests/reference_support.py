"""The engine's findings held to tests/reference.py's (no tests here): the same codes, objects, fields,
related objects and counts, and a witness among the cells the plain loop says the finding is about."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from simulation import evaluate as ev
from simulation import findings
from simulation.semantics import catalog as cat
from tests import reference

CODES = frozenset({"same-weight-conflict", "shadowed", "price-clamped"})
Key = tuple[str, str, str, tuple[str, ...], int, str, str]


def expected(overlays: Sequence[dict[str, Any]], pools: Sequence[dict[str, Any]],
             catalog: cat.Catalog) -> list[reference.Found]:
    """The plain loop's findings over the overlays it holds valid itself."""
    judged = reference.judge(overlays, pools, catalog)
    return reference.findings(judged.overlays, judged.pools, catalog, judged.result)


def assert_all(report: ev.Report, found: Sequence[reference.Found]) -> None:
    """Every object judged: the report's findings of these codes are exactly the reference's."""
    got = [_key(f) for f in report.findings if f.code in CODES]
    assert sorted(got) == sorted(_want(x) for x in found)
    _witnessed(report.findings, found)


def assert_involving(report: ev.Report, found: Sequence[reference.Found], candidates: set[str]) -> None:
    """A report on a few candidates: every finding on one of them, and of those on other objects that name
    one as related, the first few listed and the rest counted ("and N more")."""
    mine = [f for f in report.findings if f.code in CODES and f.obj.name in candidates]
    assert sorted(_key(f) for f in mine) == sorted(_want(x) for x in found if x.obj in candidates)
    others = [f for f in report.findings if f.code in CODES and f.obj.name not in candidates]
    counted: Counter[tuple[str, tuple[str, ...]]] = Counter()
    for f in others:
        naming = tuple(r.name for r in f.related if r.name in candidates)
        counted[(f.code, naming)] += 1 + int(dict(f.detail).get("moreObjects", "0"))
    assert counted == Counter((x.code, tuple(r for r in x.related if r in candidates)) for x in found
                              if x.obj not in candidates and candidates.intersection(x.related))
    _witnessed(report.findings, found)


def _witnessed(got: Iterable[findings.Finding], found: Sequence[reference.Found]) -> None:
    """Each finding is one of the reference's, and its witness the one the reference picks among the cells that
    one is about (the first its NodePool launches, else the first)."""
    chosen = {_want(x): x.witness for x in found}
    for f in got:
        if f.code in CODES:
            assert f.witness is not None and _cell(f.witness) == chosen[_key(f)], (f, f.witness, chosen[_key(f)])


def _want(x: reference.Found) -> Key:
    return (x.code, x.obj, x.field, x.related, x.more, x.karpenter, x.dropped)


def _key(f: findings.Finding) -> Key:
    detail = dict(f.detail)
    field = detail.get("field") or ("price" if f.path[1] in ("price", "priceAdjustment")
                                    else f"capacity/{f.path[2]}")
    return (f.code, f.obj.name, field, tuple(r.name for r in f.related), int(detail.get("more", "0")),
            detail.get("karpenter", ""), detail.get("dropped", ""))


def _cell(w: findings.Witness) -> tuple[str, ...]:
    return (w.nodepool, w.instance_type) + ((w.offering.zone, w.offering.capacity_type) if w.offering else ())
