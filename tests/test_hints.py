"""Fix hints: every error finding carries one, and a conflict's hint, applied, resolves it while
today's winner keeps its value."""

from __future__ import annotations

import io
import itertools
import json
import pathlib
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from ruamel.yaml import YAML

from lint import cli
from simulation.analysis import hints
from tests import casefmt
from tests.lint_support import CATALOG, nodepool, write

CASES = casefmt.discover()


def overlay(name: str, weight: int, *, family: str | None = None, pool: str | None = None,
            adjustment: str = "-10%") -> dict[str, Any]:
    reqs: list[dict[str, Any]] = [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}]
    if family:
        reqs.append({"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": [family]})
    if pool:
        reqs.append({"key": "karpenter.sh/nodepool", "operator": "In", "values": [pool]})
    return {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": name},
            "spec": {"weight": weight, "requirements": reqs, "priceAdjustment": adjustment}}


def check(*paths: str, existing: str | None = None, catalog: str | None = CATALOG,
          crd: str | None = None) -> tuple[int, dict[str, Any]]:
    argv = ["check", *paths, "--format", "json", *(["--crd", crd] if crd else [])]
    argv += ["--existing", existing] if existing else []
    argv += ["--catalog", catalog] if catalog else []
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(argv, stdout=out, stderr=err)
    assert code in (0, 1), err.getvalue()
    return code, json.loads(out.getvalue())


def conflicts(data: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for f in data["findings"] if f["code"] == "same-weight-conflict"]


def pair(f: dict[str, Any]) -> frozenset[str]:
    return frozenset({f["object"]["name"], *(r["name"] for r in f["related"])})


def _weight(fix: str) -> tuple[str, int]:
    name, _, weight = fix.rpartition("=")
    return name, int(weight)


# --- conflicts: the hint, applied, resolves the conflict -------------------------------------------

def _apply(objects: list[dict[str, Any]], finding: dict[str, Any], option: str) -> str | None:
    """Edit `objects` as the hint's option says; the name of the overlay it changed."""
    detail = finding["detail"]
    if option not in detail:
        return None
    if option == "disjoint":
        fix = detail[option]
        target = next(o for o in objects if o["metadata"]["name"] == fix["overlay"])
        target["spec"]["requirements"].append(fix["requirement"])
        return str(fix["overlay"])
    name, weight = _weight(detail[option])
    next(o for o in objects if o["metadata"]["name"] == name)["spec"]["weight"] = weight
    return name


def _price_overlays(tmp_path: pathlib.Path, path: str) -> set[str]:
    out, err = io.StringIO(), io.StringIO()
    assert cli.main(["simulate", path, "--catalog", CATALOG, "--format", "json"], stdout=out, stderr=err) in (0, 1)
    data = json.loads(out.getvalue())
    return {o["priceOverlay"] for pool in data["nodepools"].values() for cell in pool.values()
            for o in cell["offerings"] if o["priceOverlay"]}


@pytest.mark.parametrize("option", ["raiseWeight", "lowerWeight", "disjoint"])
def test_conflict_hint_resolves_it_and_keeps_the_winner(tmp_path: pathlib.Path, option: str) -> None:
    objects = [overlay("broad", 10), overlay("gpu", 10, family="g5", adjustment="+5%"), nodepool("p")]
    path = write(tmp_path, "o.yaml", *objects)
    code, data = check(path)
    (finding,) = conflicts(data)
    assert code == 1 and finding["hint"]
    winner = "gpu"  # later in the alphabet: first in Karpenter's order, its price is in effect today
    assert finding["detail"]["raiseWeight"] == f"{winner}=11"
    assert finding["detail"]["lowerWeight"] == "broad=9"
    assert finding["detail"]["disjoint"] == {"overlay": "broad", "requirement": {
        "key": "karpenter.k8s.aws/instance-family", "operator": "NotIn", "values": ["g5"]}}
    before = _price_overlays(tmp_path, path)
    assert _apply(objects, finding, option) is not None
    fixed = write(tmp_path, "fixed.yaml", *objects)
    code, data = check(fixed)
    assert conflicts(data) == [] and code == 0
    assert winner in _price_overlays(tmp_path, fixed) and before <= _price_overlays(tmp_path, fixed) | {"broad"}


@pytest.mark.parametrize("option", ["raiseOtherWeight", "lowerOtherWeight"])
def test_conflict_hint_offers_to_put_the_other_overlay_ahead(tmp_path: pathlib.Path, option: str) -> None:
    """Today's winner is the later name, which says nothing of what was meant: both directions are offered."""
    objects = [overlay("broad", 10), overlay("gpu", 10, family="g5", adjustment="+5%"), nodepool("p")]
    _, data = check(write(tmp_path, "o.yaml", *objects))
    (finding,) = conflicts(data)
    assert (finding["detail"]["raiseOtherWeight"], finding["detail"]["lowerOtherWeight"]) == ("broad=11", "gpu=9")
    assert _apply(objects, finding, option) is not None
    fixed = write(tmp_path, "fixed.yaml", *objects)
    code, data = check(fixed)
    assert conflicts(data) == [] and code == 0
    assert "broad" in _price_overlays(tmp_path, fixed)


@pytest.mark.parametrize(("spec", "field", "wanted", "unwanted"), [
    ({"priceAdjustment": "-10%"}, "spec.requirements", "add spec.requirements", "at most 100"),
    ({"requirements": "karpenter.sh/capacity-type", "priceAdjustment": "-10%"}, "spec.requirements",
     "as a list", "at most 100"),
    ({"requirements": [], "price": "1e308"}, "spec.price", '"0.5"', "0000000000000"),
    ({"requirements": [], "priceAdjustment": "28%"}, "spec.priceAdjustment",
     '"-28%" for a discount or "+28%" for a surcharge', None),
])
def test_object_error_hints_fit_the_error(tmp_path: pathlib.Path, spec: dict[str, Any], field: str, wanted: str,
                                          unwanted: str | None) -> None:
    obj = {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": "o"},
           "spec": {"weight": 10, **spec}}
    _, data = check(write(tmp_path, "o.yaml", obj))
    hints = [f["hint"] for f in data["findings"] if f["field"] == field and f["severity"] == "error"]
    assert hints and all(wanted in h for h in hints), hints
    assert unwanted is None or not any(unwanted in h for h in hints)


def test_conflict_hint_avoids_a_third_overlays_weight(tmp_path: pathlib.Path) -> None:
    # `third` sits at 11 on gpu's cells (and at 9 on broad's): the hint skips both.
    objects = [overlay("broad", 10), overlay("gpu", 10, family="g5"), overlay("third", 11, family="g5"),
               overlay("fourth", 9, family="m5")]
    _, data = check(write(tmp_path, "o.yaml", *objects))
    (finding,) = [f for f in conflicts(data) if pair(f) == {"broad", "gpu"}]
    assert finding["detail"]["raiseWeight"] == "gpu=12"
    assert finding["detail"]["lowerWeight"] == "broad=8"
    # A third overlay at 11 elsewhere (disjoint cells) does not push the weight up.
    objects[2] = overlay("third", 11, family="m5")
    _, data = check(write(tmp_path, "o2.yaml", *objects))
    (finding,) = [f for f in conflicts(data) if pair(f) == {"broad", "gpu"}]
    assert finding["detail"]["raiseWeight"] == "gpu=11"


@pytest.mark.parametrize(("weight", "raise_to", "lower_to"), [(10000, None, 9999), (1, 2, None)])
def test_conflict_hint_respects_the_weight_bounds(tmp_path: pathlib.Path, weight: int, raise_to: int | None,
                                                  lower_to: int | None) -> None:
    _, data = check(write(tmp_path, "o.yaml", overlay("a", weight), overlay("b", weight)))
    (finding,) = conflicts(data)
    assert finding["detail"].get("raiseWeight") == (f"b={raise_to}" if raise_to else None)
    assert finding["detail"].get("lowerWeight") == (f"a={lower_to}" if lower_to else None)
    assert finding["hint"]


# --- every error finding of the corpus has a hint; every conflict's options resolve it -----------------

def _documents(path: pathlib.Path) -> list[Any]:
    return [d for d in YAML(typ="safe").load_all(path.read_text(encoding="utf-8")) if d is not None]


def _flatten(docs: list[Any]) -> list[Any]:
    out = []
    for d in docs:
        if isinstance(d, dict) and d.get("kind") == "List" and isinstance(d.get("items"), list):
            out += d["items"]
        else:
            out.append(d)
    return out


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_corpus_errors_have_hints_and_conflict_hints_work(case: casefmt.Case, tmp_path: pathlib.Path) -> None:
    existing = str(case.existing) if case.existing is not None else None
    _, data = check(str(case.input), existing=existing, catalog=None, crd=case.crd)
    for f in data["findings"]:
        if f["severity"] == "error":
            assert f.get("hint"), f"{f['code']} {f['field']} has no hint: {f['message']}"
    for finding in conflicts(data):
        for option in ("raiseWeight", "lowerWeight", "raiseOtherWeight", "lowerOtherWeight", "disjoint"):
            inputs, changed = _with_hint_applied(case, finding, option)
            if changed is None:
                continue
            after = _check_inputs(tmp_path, option, inputs, case.crd)
            assert pair(finding) not in {pair(f) for f in conflicts(after)}, (option, finding["hint"])
            new = {pair(f) for f in conflicts(after) if changed in pair(f)} - {pair(f) for f in conflicts(data)}
            assert not new, (option, finding["hint"])


def _with_hint_applied(case: casefmt.Case, finding: dict[str, Any],
                       option: str) -> tuple[dict[str, list[Any]], str | None]:
    """The case's documents with the hint's `option` applied, and the name of the overlay it changed."""
    inputs = {"input": _flatten(_documents(case.input))}
    if case.existing is not None:
        inputs["existing"] = _flatten(_documents(case.existing))
    changed = None
    for docs in inputs.values():
        objects = [d for d in docs if isinstance(d, dict) and d.get("kind") == "NodeOverlay"
                   and isinstance(d.get("metadata"), dict)]
        try:
            changed = _apply(objects, finding, option) or changed
        except StopIteration:
            continue
        if changed:
            break
    return inputs, changed


def _check_inputs(tmp_path: pathlib.Path, option: str, inputs: dict[str, list[Any]],
                  crd: str | None) -> dict[str, Any]:
    paths = {k: tmp_path / f"{option}-{k}.json" for k in inputs}
    for k, docs in inputs.items():
        paths[k].write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}))
    _, after = check(str(paths["input"]), existing=str(paths["existing"]) if "existing" in paths else None,
                     catalog=None, crd=crd)
    return after


# --- the hint reaches every front end --------------------------------------------------------------

def test_hint_in_sarif_github_and_junit(tmp_path: pathlib.Path) -> None:
    path = write(tmp_path, "o.yaml", overlay("a", 10), overlay("b", 10))
    _, data = check(path)
    (finding,) = conflicts(data)
    for fmt in ("sarif", "github", "junit", "text"):
        out, err = io.StringIO(), io.StringIO()
        assert cli.main(["check", path, "--catalog", CATALOG, "--format", fmt], stdout=out, stderr=err) == 1
        assert finding["hint"] in out.getvalue().replace("%0A", "\n"), fmt
    out = io.StringIO()
    cli.main(["check", path, "--catalog", CATALOG, "--format", "sarif"], stdout=out, stderr=io.StringIO())
    (result,) = json.loads(out.getvalue())["runs"][0]["results"]
    assert result["properties"]["hint"] == finding["hint"]


async def test_webhook_denial_carries_the_hint(tmp_path: pathlib.Path) -> None:
    import aiohttp

    from tests.webhook_support import default_catalog, fixture, fixture_state, linter_verdict, serving

    body = fixture("create-conflict")
    expected = linter_verdict(body["request"]["object"], fixture_state(), default_catalog()).errors()
    assert expected and all(f.hint for f in expected)
    async with serving(tmp_path, fixture_state()) as srv, aiohttp.ClientSession() as session:
        _, out = await srv.post(session, "/validate", body)
    message = out["response"]["status"]["message"]
    assert out["response"]["allowed"] is False
    assert f"fix: {expected[0].hint}" in message, message


@pytest.mark.parametrize(("written", "quoted"), [("on", None), ("yes", None), ("1", '"1"'), ("0.5", '"0.5"')])
def test_an_unquoted_requirement_value_is_told_to_be_quoted(tmp_path: pathlib.Path, written: str,
                                                            quoted: str | None) -> None:
    path = tmp_path / "o.yaml"
    path.write_text("apiVersion: karpenter.sh/v1alpha1\nkind: NodeOverlay\nmetadata: {name: a}\n"
                    f"spec:\n  price: \"1\"\n  requirements:\n  - {{key: team, operator: In, values: [{written}]}}\n")
    _, data = check(str(path))
    [finding] = [f for f in data["findings"] if f["severity"] == "error"]
    assert (finding["code"], finding["field"]) == ("schema", "spec.requirements[0].values[0]")
    hint = finding["hint"]
    assert "quote the value" in hint
    assert quoted is None or quoted in hint


@given(st.text(), st.text(), st.lists(st.text(), min_size=1, max_size=4))
def test_the_disjoint_requirement_is_written_as_json_writes_it(target: str, key: str, values: list[str]) -> None:
    # Written by hand around json's string encoder: the inline form and the detail must stay what json.dumps gives.
    requirement = {"key": key, "operator": "NotIn", "values": sorted(set(values))}
    assert hints._not_in(target, key, tuple(values)) == (
        json.dumps(requirement, separators=(", ", ": ")),
        json.dumps({"overlay": target, "requirement": requirement}, sort_keys=True))


def test_a_free_weight_past_a_run_of_taken_ones() -> None:
    """The first weight no overlay on common cells holds, either way, however many are taken in a row, or none
    within the API's bounds."""
    from simulation.semantics import catalog as cat
    from simulation.semantics import cells, merge, model

    offering = cat.Offering("z-a", "spot", 1.0)
    grid = cells.build(cat.Catalog((cat.InstanceType("it0", {"family": "a"}, {"cpu": "2"}, (offering,)),), "one"),
                       [model.IMPLICIT_NODEPOOL])

    def entry(name: str, weight: int) -> merge.Entry:
        return merge.entry(grid, model.overlay({"metadata": {"name": name},
                                                "spec": {"weight": weight, "price": "1", "requirements": []}}))

    new = entry("new", 1)
    taken = hints.Taken([entry(f"l{w}", w) for w in range(1, 61) if w != 45])
    assert taken.free(new, 1, 1) == 45
    assert taken.free(new, 60, -1) == 45
    assert taken.free(new, 61, 1) == 61
    top = hints.Taken([entry(f"t{w}", w) for w in range(hints.MAX_WEIGHT - 40, hints.MAX_WEIGHT + 1)])
    assert top.free(new, hints.MAX_WEIGHT - 40, 1) is None


@given(st.lists(st.tuples(st.integers(0, 5), st.integers(1, 4), st.integers(1, 6), st.booleans()),
                min_size=20, max_size=80),
       st.integers(0, 5), st.integers(1, 6), st.sets(st.integers(0, 79), max_size=6), st.integers(1, 6))
def test_free_weights_over_crowds_are_the_ones_a_scan_finds(
        placed: list[tuple[int, int, int, bool]], family: int, start: int, gone: set[int], fresh_weight: int) -> None:
    """Crowded weights (more than hints._FEW overlays) are tested through their unions: the weight found is the one
    testing clash.meets against every overlay there finds, also with overlays left out and added by a request."""
    grid = _family_grid(8, ("spot", "on-demand"))
    stored = [_family_entry(grid, f"o{i}", first, width, weight, price)
              for i, (first, width, weight, price) in enumerate(placed)]
    new = _family_entry(grid, "new", family, 2, 1, True)
    left_out = {f"o{i}" for i in gone if i < len(stored)}
    added = [_family_entry(grid, "fresh", family, 1, fresh_weight, True)]

    taken = hints.Taken(stored)
    changed = taken.changed(added, left_out)
    for step in (1, -1):
        assert taken.free(new, start, step) == _scanned(new, stored, start, step)
        kept = [o for o in stored if o.name not in left_out] + added
        assert changed.free(new, start, step) == _scanned(new, kept, start, step)


@given(st.sampled_from([hints.MIN_WEIGHT, 200, hints.MAX_WEIGHT - 50]),
       st.lists(st.tuples(st.integers(0, 5), st.integers(1, 4), st.integers(0, 59), st.booleans()),
                min_size=20, max_size=120),
       st.integers(0, 5), st.integers(0, 59), st.booleans(), st.integers(0, 59),
       st.sets(st.integers(0, 119), max_size=8), st.lists(st.integers(0, 59), max_size=3),
       st.integers(0, 59), st.integers(0, 60), st.sets(st.integers(0, 59), max_size=3))
def test_free_weights_past_long_runs_are_the_ones_a_scan_finds(
        low: int, placed: list[tuple[int, int, int, bool]], family: int, own: int, stored_too: bool, start: int,
        gone: set[int], fresh: list[int], rungs_from: int, rungs: int, holes: set[int]) -> None:
    """Ladders: runs of held weights longer than a walk (hints._WALK), read from the index's crowd at once, give the
    weight testing clash.meets against every overlay at each weight finds, either way, with the overlay itself
    stored or not, overlays left out and added by a request, and near the API's bounds."""
    from simulation.analysis import index

    grid = _family_grid(8, ("spot", "on-demand"))

    def entry(name: str, first: int, width: int, offset: int, price: bool) -> Any:
        return _family_entry(grid, name, first, width, min(low + offset, hints.MAX_WEIGHT), price)

    new = entry("new", family, 2, own, True)
    stored = [entry(f"o{i:03d}", first, width, offset, price) for i, (first, width, offset, price) in enumerate(placed)]
    # A ladder on the overlay's own cells, but for a few holes.
    stored += [entry(f"rung{k:02d}", family, 2, rungs_from + k, True) for k in range(rungs) if k not in holes]
    stored += [new] if stored_too else []
    left_out = {f"o{i:03d}" for i in gone if i < len(placed)}
    added = [entry(f"fresh{k}", family, 1, offset, True) for k, offset in enumerate(fresh)]
    first = min(low + start, hints.MAX_WEIGHT)

    built = index.Index.build(stored, 1)
    kept = [o for o in stored if o.name not in left_out] + added
    for step in (1, -1):
        whole = built.taken.changed((), (), built.crowd(set()))
        assert whole.free(new, first, step) == _scanned(new, stored, first, step)
        found = _scanned(new, kept, first, step)
        assert built.taken.changed(added, left_out, built.crowd(left_out)).free(new, first, step) == found
        assert built.taken.changed(added, left_out).free(new, first, step) == found


@given(st.lists(st.tuples(st.integers(0, 3), st.integers(1, 3), st.integers(1, 8), st.booleans()),
                min_size=2, max_size=60),
       st.integers(0, 40), st.sets(st.integers(0, 39), max_size=3))
def test_walks_of_many_overlays_over_one_index_are_the_ones_a_scan_finds(
        placed: list[tuple[int, int, int, bool]], rungs: int, holes: set[int]) -> None:
    """Each stored overlay's walks up from above its weight and down from below it (a conflict hint's), asked in turn
    of one index (which shares the steps of overlays with equal fields), find what a scan finds for each alone: as a
    full run asks them, the walks of equal overlays sharing what they passed (Taken._walks) while those past
    hints._WALK weights read the crowd (Taken._runs), and without the crowd. The rungs of a ladder on every family,
    but for a few holes, make runs of held weights longer than a walk, and a group of equal overlays that walks it."""
    from simulation.analysis import index

    grid = _family_grid(6, ("spot",))
    stored = [_family_entry(grid, f"o{i}", first, width, weight, price)
              for i, (first, width, weight, price) in enumerate(placed)]
    stored += [_family_entry(grid, f"rung{k:02d}", 0, 6, 2 + k, True) for k in range(rungs) if k not in holes]

    built = index.Index.build(stored, 1)
    for taken in (built.taken.changed((), (), built.crowd(set())), hints.Taken(stored)):
        for e in stored:
            for step in (1, -1):
                start = e.overlay.weight + step
                assert taken.free(e, start, step) == _scanned(e, stored, start, step)


@given(st.lists(st.tuples(st.integers(0, 3), st.integers(1, 3), st.integers(1, 8), st.booleans()),
                min_size=2, max_size=60),
       st.integers(0, 12), st.sets(st.integers(0, 11), max_size=3), st.sets(st.integers(0, 59), max_size=8))
def test_holders_are_one_overlay_per_weight_the_walk_to_the_free_one_passes(
        placed: list[tuple[int, int, int, bool]], rungs: int, holes: set[int], invalid: set[int]) -> None:
    """What `holders` names (what analysis/needed.py keeps of a conflict hint's walk) is, at each weight from the
    start up to the free weight a scan finds, the first overlay there in the order given that meets the one placed;
    asked with a validity test, it is what a Taken of the valid overlays alone names."""
    from simulation.semantics import clash

    grid = _family_grid(6, ("spot",))
    stored = [_family_entry(grid, f"o{i}", first, width, weight, price)
              for i, (first, width, weight, price) in enumerate(placed)]
    stored += [_family_entry(grid, f"rung{k:02d}", 0, 6, 2 + k, True) for k in range(rungs) if k not in holes]
    bad = {f"o{i}" for i in invalid}
    valid = [o for o in stored if o.name not in bad]
    whole = hints.Taken(stored)
    # A conflict hint's walks, away from the overlay's weight, and walks across it (which pass over the overlay).
    for e, step, start in ((e, step, e.overlay.weight + away * step) for e in stored for step in (1, -1)
                           for away in (1, -1)):
        for among, named in ((stored, whole.holders(e, start, step)),
                             (valid, whole.holders(e, start, step, lambda name: name not in bad)),
                             (valid, hints.Taken(valid).holders(e, start, step))):
            end = _scanned(e, among, start, step)  # None: the walk ends at the API's bounds
            passed = itertools.takewhile(lambda w: hints.MIN_WEIGHT <= w <= hints.MAX_WEIGHT,
                                         range(start, end if end is not None else start + step * hints.MAX_WEIGHT,
                                               step))
            assert list(named) == [next(o for o in among if o.overlay.weight == w and o.name != e.name
                                        and clash.meets(e, o)) for w in passed]


def _family_grid(count: int, capacity_types: tuple[str, ...]) -> Any:
    """`count` instance types, family f0, f1, ..., each with one offering per capacity type in one zone."""
    from simulation.semantics import catalog as cat
    from simulation.semantics import cells, model

    types = tuple(cat.InstanceType(f"it{i}", {"family": f"f{i}"}, {"cpu": "2"},
                                   tuple(cat.Offering("z-a", ct, 1.0) for ct in capacity_types))
                  for i in range(count))
    return cells.build(cat.Catalog(types, f"{count} families"), [model.IMPLICIT_NODEPOOL])


def _family_entry(grid: Any, name: str, first: int, width: int, weight: int, price: bool) -> Any:
    """An overlay on families f{first}..f{first + width - 1} setting a price or a capacity."""
    from simulation.semantics import merge, model

    field = {"price": "1"} if price else {"capacity": {"example.com/gpu": "1"}}
    values = [f"f{first + k}" for k in range(width)]
    return merge.entry(grid, model.overlay({"metadata": {"name": name}, "spec": {
        "weight": weight, **field, "requirements": [{"key": "family", "operator": "In", "values": values}]}}))


def _scanned(e: Any, among: list[Any], start: int, step: int) -> int | None:
    """The free weight for `e` from `start` by `step`, testing clash.meets against every overlay at each weight."""
    from simulation.semantics import clash

    weight = start
    while hints.MIN_WEIGHT <= weight <= hints.MAX_WEIGHT:
        if not any(o.name != e.name and o.overlay.weight == weight and clash.meets(e, o) for o in among):
            return weight
        weight += step
    return None
