"""webhook ≡ linter on the fixture corpus (tests/cases/, format in tests/casefmt.py).

For every case folder and every NodeOverlay C among its inputs, C is admitted over HTTPS
against the cluster state existing + (input minus C) — as CREATE, or as UPDATE with the stored
version as oldObject when that state already has C's name — and the webhook's verdict and
findings (code, severity, object, field) must equal evaluate([C], prepare(state)), which is
what `overlay-lint check C --existing state` computes; a case's `--crd` is pinned in the webhook too.
/mutate's status annotation must equal the simulated status of C.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from simulation.semantics import catalog as cat
from simulation.semantics import model, region
from simulation.validation import crds
from sources import objects, positions
from tests import casefmt
from tests.webhook_support import Pki, default_catalog, linter_verdict, make_pki, review, serving
from webhook import loader, patch

CASES = casefmt.discover()


@dataclasses.dataclass(frozen=True)
class Admission:
    case: str
    candidate: Mapping[str, Any]
    state: tuple[Mapping[str, Any], ...]
    catalog: cat.Catalog
    crd: crds.Crd | None

    @property
    def name(self) -> str:
        return model.name_of(self.candidate) or ""


def _docs(path: Path | None) -> list[Any]:
    """Objects as `--state` reads them: the webhook's reader refuses a file with any parse finding."""
    if path is None:
        return []
    loaded = objects.Loader(positions.Table()).load([str(path)], candidate=False)
    if loaded.problems:
        raise loader.LoadError(f"{path}: {loaded.problems[0].message}")
    return [*(d.obj for d in loaded.documents), *(obj for obj, _ in loaded.instance_types)]


def admissions(case: casefmt.Case) -> list[Admission]:
    """Nothing for cases the API server could never send (unreadable YAML, a broken catalog)."""
    try:
        inputs, existing = _docs(case.input), _docs(case.existing)
    except loader.LoadError:
        return []
    types = [
        d for d in [*inputs, *existing] if isinstance(d, Mapping) and d.get("kind") == model.INSTANCETYPE
    ]
    try:
        catalog = cat.from_documents(types) if types else default_catalog()
    except cat.CatalogError:
        return []
    # The region the cluster's Nodes would report: the one the linter takes from the case's objects.
    catalog = region.choose(catalog, [*inputs, *existing], case.region).catalog

    def kept(d: Any) -> bool:
        return isinstance(d, Mapping) and model.kind_of(d) in (model.NODEOVERLAY, model.NODEPOOL)

    out = []
    for i, doc in enumerate(inputs):
        if not kept(doc) or model.kind_of(doc) != model.NODEOVERLAY or model.name_of(doc) is None:
            continue
        state = [d for d in existing if kept(d)] + [d for j, d in enumerate(inputs) if j != i and kept(d)]
        out.append(Admission(case.name, doc, tuple(state), catalog, case.compiled_crd()))
    return out


ALL = [a for c in CASES for a in admissions(c)]


def test_the_corpus_has_admissions() -> None:
    """Never pass vacuously: the corpus must give the webhook something to admit."""
    assert CASES, f"no case folders under {casefmt.CASES_DIR}"
    assert len(ALL) >= 1, "no NodeOverlay candidates in any case"


def rows(found: Sequence[Mapping[str, str]]) -> list[tuple[str, str, str, str]]:
    return sorted((r["code"], r["severity"], r["object"], r["field"]) for r in found)


def first_by_name(state: Sequence[Mapping[str, Any]], name: str) -> Mapping[str, Any] | None:
    return next(
        (d for d in state if model.kind_of(d) == model.NODEOVERLAY and model.name_of(d) == name), None
    )


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


# Cases with no admissible NodeOverlay (unreadable YAML, NodePool-only) have nothing to send.
@pytest.mark.parametrize("case", sorted({a.case for a in ALL}))
async def test_webhook_equals_linter(case: str, pki: Pki, tmp_path: Path) -> None:
    todo = [a for a in ALL if a.case == case]
    for adm in todo:
        expected = linter_verdict(adm.candidate, adm.state, adm.catalog, adm.crd)
        old = first_by_name(adm.state, adm.name)
        body = review(adm.candidate, "UPDATE" if old is not None else "CREATE", old=old)
        async with (
            serving(tmp_path, adm.state, catalog=adm.catalog, pki=pki, crd=adm.crd) as srv,
            aiohttp.ClientSession() as session,
        ):
            status, out = await srv.post(session, "/validate", body)
            assert status == 200, out
            resp = out["response"]
            audit = resp["auditAnnotations"]
            assert "truncated" not in audit
            want = rows(
                [
                    {"code": f.code, "severity": str(f.severity), "object": str(f.obj), "field": f.field}
                    for f in expected.findings
                ]
            )
            assert rows(json.loads(audit["findings"])) == want, f"{case}: {adm.name}"
            assert resp["allowed"] is (not expected.errors()), f"{case}: {adm.name}: {resp}"

            status, out = await srv.post(session, "/mutate", body)
            assert status == 200 and out["response"]["allowed"] is True
            applied = _apply(body["request"]["object"], out["response"])
            simulated = expected.status_of(adm.name).state
            assert applied["metadata"]["annotations"][patch.STATUS] == simulated, f"{case}: {adm.name}"


def _apply(obj: Mapping[str, Any], resp: Mapping[str, Any]) -> dict[str, Any]:
    import base64
    import copy

    from tests.webhook_support import apply_patch

    out = copy.deepcopy(dict(obj))
    if "patch" in resp:
        out = apply_patch(out, json.loads(base64.b64decode(resp["patch"])))
    return out
