"""Karpenter's known traps (issue 41): what each finding says, beyond the code and field the cases in
tests/cases/ hold."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest

from simulation.analysis import traps
from tests import lint_support as ls

ZONE = "topology.kubernetes.io/zone"


def _overlay(name: str, *requirements: tuple[str, str, list[str]], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": name},
            "spec": {"requirements": [{"key": k, "operator": o, "values": v} for k, o, v in requirements], **spec}}


def _check(tmp_path: pathlib.Path, *objects: dict[str, Any], args: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    code, out, err = ls.run("check", ls.write(tmp_path, "in.yaml", *objects), "--format", "json", *args,
                            catalog=False)
    assert code in (0, 1), err
    found: list[dict[str, Any]] = json.loads(out)["findings"]
    return found


@pytest.mark.parametrize(("region", "zone", "proposed"), [
    ("westeurope", "westeurope-4", "westeurope-3"), ("us-central1", "us-central1-d", "us-central1-c"),
])
def test_a_zone_hint_proposes_a_zone_of_the_regions_own_cloud(tmp_path: pathlib.Path, region: str, zone: str,
                                                             proposed: str) -> None:
    found = _check(tmp_path, _overlay("z", (ZONE, "In", [zone]), price="1"), args=("--region", region))
    [miss] = [f for f in found if f["code"] == "no-match"]
    assert f"did you mean {proposed!r}" in miss["message"]


CASES = pathlib.Path(__file__).parent / "cases"
FLIPS = str(CASES / "trap-price-metric-flips" / "input.yaml")


def test_a_nodepool_scoped_price_is_a_note_in_check_not_a_failure() -> None:
    code, out, err = ls.run("check", FLIPS, catalog=False)
    assert code == 0, err
    assert "price-metric-flips" in out and "1 note" in out


def test_a_nodepool_scoped_price_is_listed_in_the_report(tmp_path: pathlib.Path) -> None:
    page = tmp_path / "report.html"
    code, _, err = ls.run("report", FLIPS, "-o", str(page), catalog=False)
    assert code == 0, err
    assert 'data-code="price-metric-flips"' in page.read_text(encoding="utf-8")


def test_a_nodepool_scoped_price_is_a_normal_audit_event_on_the_overlay_and_its_nodepool() -> None:
    from ruamel.yaml import YAML

    from simulation import evaluate
    from simulation.semantics import catalog as cat
    from webhook import events

    objects = [o for o in YAML(typ="safe").load_all(pathlib.Path(FLIPS).read_text(encoding="utf-8")) if o]
    docs = [evaluate.Document(o, i) for i, o in enumerate(objects)]
    report = evaluate.evaluate(docs, evaluate.prepare([], cat.default()))
    notes = [n for n in events.notes(report.findings) if n.reason == events.PRICE_METRIC]
    assert {(str(n.regarding), n.warning) for n in notes} == {
        ("NodeOverlay/team-a-savings-plan", False), ("NodePool/team-a", False)}


@pytest.mark.parametrize(("lower", "higher", "base", "combined"), [
    ("-10%", "+5%", None, 'priceAdjustment: "-5.5%"'),
    ("-0.01", "+0.05", None, 'priceAdjustment: "+0.04"'),
    ("0.2", "+10%", None, 'price: "0.22"'),
    ("+10%", "0.2", None, 'price: "0.22"'),
    ("-10%", "+0.05", 0.096, 'price: "0.1364" for this offering'),
])
def test_overlays_meant_to_stack_are_told_the_one_overlay_that_charges_both(lower: str, higher: str,
                                                                            base: float | None,
                                                                            combined: str) -> None:
    from simulation.analysis import traps
    from simulation.semantics import model

    def price(name: str, change: str, weight: int) -> model.Overlay:
        field = "priceAdjustment" if change.startswith(("+", "-")) else "price"
        return model.overlay(_overlay(name, ("node.kubernetes.io/instance-type", "In", ["m5.large"]),
                                      weight=weight, **{field: change}))

    stack = traps.stacked(price("discount", lower, 10), price("fee", higher, 20), base)
    assert stack is not None
    said, hint = stack
    assert "never stack" in said and "#2616" in said
    assert f"weight 20 setting {combined}" in hint and "#3004" in hint


def test_the_stacking_hint_is_each_winners_own_whatever_was_asked_before() -> None:
    """The hint is kept per (changes, weight, base price): winners of other names share it, another weight, base or
    change gets its own, and the message names each winner."""
    from simulation.analysis import traps
    from simulation.semantics import model

    def price(name: str, change: str, weight: int) -> model.Overlay:
        return model.overlay(_overlay(name, ("node.kubernetes.io/instance-type", "In", ["m5.large"]),
                                      weight=weight, priceAdjustment=change))

    lower = price("discount", "-10%", 10)
    asked = [(price(n, c, w), base) for n, c, w, base in (
        ("fee-a", "+0.05", 20, 0.096), ("fee-b", "+0.05", 20, 0.096), ("fee-c", "+0.05", 30, 0.096),
        ("fee-d", "+0.05", 20, 0.2), ("fee-e", "+5%", 20, 0.096), ("fee-a", "+0.05", 20, 0.096))]
    said = [traps.stacked(lower, winner, base) for winner, base in asked]
    assert all(s is not None for s in said)
    assert [s[0].split("only ")[1].split("'s")[0] for s in said if s] == [w.name for w, _ in asked]
    hints = [s[1] for s in said if s]
    assert hints[0] == hints[1] == hints[5]
    assert "weight 30 setting" in hints[2] and "weight 20 setting" in hints[0]
    assert 'price: "0.1364"' in hints[0] and 'price: "0.23"' in hints[3]
    assert 'priceAdjustment: "-5.5%"' in hints[4]


def test_two_absolute_prices_are_told_to_keep_one() -> None:
    from simulation.analysis import traps
    from simulation.semantics import model

    overlays = [model.overlay(_overlay(n, ("node.kubernetes.io/instance-type", "In", ["m5.large"]), price="0.1"))
                for n in ("a", "b")]
    stack = traps.stacked(overlays[0], overlays[1], 0.096)
    assert stack is not None and "keep one" in stack[1] and "setting" not in stack[1]


def test_a_price_field_won_by_an_overlay_without_a_price_says_nothing_of_stacking() -> None:
    from simulation.analysis import traps
    from simulation.semantics import model

    m5 = ("node.kubernetes.io/instance-type", "In", ["m5.large"])
    assert traps.stacked(model.overlay(_overlay("a", m5, price="0.1")),
                         model.overlay(_overlay("b", m5, capacity={"example.com/x": "1"})), 0.096) is None


def test_a_shadowed_price_overlay_says_overlays_never_stack(tmp_path: pathlib.Path) -> None:
    m5 = ("node.kubernetes.io/instance-type", "In", ["m5.large"])
    found = _check(tmp_path, _overlay("enterprise-discount", m5, weight=10, priceAdjustment="-10%"),
                   _overlay("licence-fee", m5, weight=20, priceAdjustment="+0.05"))
    [shadowed] = [f for f in found if f["code"] == "shadowed"]
    assert shadowed["related"] == [{"kind": "NodeOverlay", "name": "licence-fee"}]
    assert 'price: "0.1364"' in shadowed["hint"] and "never stack" in shadowed["message"]


# aws/karpenter-provider-aws v1.15.0 (the release hack/karpenter-kwok/go.mod pins; module zip from proxy.golang.org,
# its h1: hash in hack/karpenter-kwok/go.sum), pkg/providers/instancetype/offering/offering.go, GetOverlayPrice,
# added by PR #9249 and reached from base_resolver.go only `if !hasPrice` (no published price):
#
#     overlayList := &v1alpha1.NodeOverlayList{}
#     if err := p.kubeClient.List(ctx, overlayList); err != nil {
#     ...
#         if !overlay.StatusConditions().IsTrue(v1alpha1.ConditionTypeValidationSucceeded) {
#             continue
#         }
#         if overlay.Spec.Price == nil {
#             continue
#         }
#         // make sure overlays with only an Instance Type and price are considered
#         if len(overlay.Spec.Requirements) != 1 ||
#             overlay.Spec.Requirements[0].Key != corev1.LabelInstanceTypeStable ||
#             overlay.Spec.Requirements[0].Operator != corev1.NodeSelectorOpIn {
#             continue
#         }
#         ...
#         for _, val := range overlay.Spec.Requirements[0].Values {
#             prices[val] = overlayPrice
#         }
#
# The list comes back in name order and the map keeps the last write: weight is never read.
PINNED_PROVIDER = "github.com/aws/karpenter-provider-aws v1.15.0"


def test_the_preview_price_finding_rests_on_the_pinned_provider() -> None:
    gomod = (ls.ROOT / "hack" / "karpenter-kwok" / "go.mod").read_text(encoding="utf-8")
    # A bump of the pinned provider must re-read GetOverlayPrice before this finding is kept (issue 41 row 6).
    assert PINNED_PROVIDER in gomod


@pytest.mark.parametrize(("requirements", "spec", "read"), [
    ([("node.kubernetes.io/instance-type", "In", ["p5e.48xlarge"])], {"price": "1"}, True),
    ([("node.kubernetes.io/instance-type", "In", ["p5e.48xlarge"])], {"priceAdjustment": "+1"}, False),
    ([("node.kubernetes.io/instance-type", "NotIn", ["p5e.48xlarge"])], {"price": "1"}, False),
    ([("beta.kubernetes.io/instance-type", "In", ["p5e.48xlarge"])], {"price": "1"}, False),
    ([("node.kubernetes.io/instance-type", "In", ["p5e.48xlarge"]),
      ("karpenter.sh/capacity-type", "In", ["on-demand"])], {"price": "1"}, False),
])
def test_the_provider_reads_single_instance_type_in_overlays_with_an_absolute_price(
        requirements: list[tuple[str, str, list[str]]], spec: dict[str, str], read: bool) -> None:
    from simulation.analysis import traps
    from simulation.semantics import model

    assert traps.provider_priced(model.overlay(_overlay("o", *requirements, **spec))) is read


_PREVIEW = ("node.kubernetes.io/instance-type", "In", ["p5e.48xlarge"])
_EXISTING = [_overlay("preview-contract", _PREVIEW, weight=50, price="55.0"),
             _overlay("preview-list", _PREVIEW, weight=10, price="40.0"),
             _overlay("preview-other", ("node.kubernetes.io/instance-type", "In", ["p5e.48xlarge", "m5.large"]),
                      weight=10, price="3.0")]


@pytest.mark.parametrize(("candidate", "expected"), [
    # the last by name, below the top
    (_overlay("preview-zz", _PREVIEW, weight=5, price="1.0"), [("preview-zz", "preview-contract")]),
    # the new top
    (_overlay("preview-aa", _PREVIEW, weight=90, price="9.0"), [("preview-other", "preview-aa")]),
    # an edit that makes it the top
    (_overlay("preview-list", _PREVIEW, weight=60, price="40.0"), [("preview-other", "preview-list")]),
    # an edit that leaves the group
    (_overlay("preview-list", _PREVIEW, weight=10, priceAdjustment="+1"), []),
    # first at weight 10: Karpenter drops the other two there, so the group is it and the top
    (_overlay("preview-zz", _PREVIEW, weight=10, price="2.0"), [("preview-zz", "preview-contract")]),
    (_overlay("preview-zz", ("node.kubernetes.io/instance-type", "In", ["m5.large"]), weight=20, price="2.0"), []),
], ids=["last-by-name", "new-top", "edit-to-top", "edit-out", "conflicting", "another-type"])
def test_one_candidate_is_told_what_the_whole_run_tells_of_preview_prices(
        candidate: dict[str, Any], expected: list[tuple[str, str]]) -> None:
    """A request reads only the preview types its candidate names (the snapshot's traps.preview_names): its
    preview-price-by-name findings are the full run's."""
    from simulation import evaluate
    from simulation.semantics import catalog as cat

    prepared = evaluate.warmed(evaluate.prepare(
        [evaluate.Document(o, i, False) for i, o in enumerate(_EXISTING)], cat.default()))

    def preview(full: bool) -> list[tuple[str, ...]]:
        report = evaluate.evaluate([evaluate.Document(candidate, 99)], prepared, full=full)
        return sorted((f.obj.name, *(r.name for r in f.related)) for f in report.findings
                      if f.code == "preview-price-by-name")

    assert preview(False) == preview(True) == expected


@pytest.mark.parametrize(("change", "limit"), [
    ("-70%", "a discount of at most 60%"), ("-0.07", "a discount of at most 0.06"),
    ("0.03", "a price of at least 0.04"),
])
def test_an_on_demand_discount_below_spot_hints_the_change_that_keeps_spot_cheaper(
        tmp_path: pathlib.Path, change: str, limit: str) -> None:
    text = (CASES / "trap-on-demand-below-spot" / "input.yaml").read_text(encoding="utf-8")
    field = "price" if change[0].isdigit() else "priceAdjustment"
    path = tmp_path / "in.yaml"
    path.write_text(text.replace('priceAdjustment: "-70%"', f'{field}: "{change}"'), encoding="utf-8")
    code, out, err = ls.run("check", str(path), "--format", "json", catalog=False)
    assert code == 0, err
    [found] = [f for f in json.loads(out)["findings"] if f["code"] == "on-demand-below-spot"]
    assert f"{limit} on m.large" in found["hint"], found["hint"]


def test_stacking_hints_from_a_warm_memo_equal_fresh_ones() -> None:
    # A ladder's shadowed overlays share their changes and prices but each names its own winner's weight.
    asked = [("-1%", "-1%", weight, base) for weight in (6, 7, 6) for base in (0.085, None)]
    asked += [("+2", "-10%", 3, 1.5), ("0.5", "-10%", 3, 1.5), ("0.5", "0.7", 4, 1.5)]
    warm = [traps._stack_fix(*a) for a in asked]
    fresh = []
    for a in asked:
        traps._stack_combined.cache_clear()
        fresh.append(traps._stack_fix(*a))
    assert warm == fresh
    assert warm[0] != warm[2] and warm[0] == warm[4]  # the same changes and price at weights 6, 7 and 6 again
