"""The typed identities the core passes around instead of encoded strings: merge.Field (what an overlay
sets), merge.State and report.Status (an overlay's status with its reason)."""

from __future__ import annotations

import json
from typing import Any

from simulation import findings
from simulation.analysis import report as rp
from simulation.semantics import cells, merge
from tests import core_support as cs

GPU = "example.com/gpu"


def _templates(*drivers: str) -> dict[str, Any]:
    return {"resourceSliceTemplates": [{"metadata": {"name": f"t{i}"}, "spec": {"driver": d}}
                                       for i, d in enumerate(drivers)]}


def test_text_is_what_the_output_shows() -> None:
    assert (str(merge.PRICE), str(merge.capacity_field(GPU)), str(merge.driver_field("gpu.example.com"))) == \
        ("price", f"capacity/{GPU}", "resourceSliceTemplates/gpu.example.com")
    assert f"{merge.capacity_field('x')}" == "capacity/x"


def test_order_is_the_order_of_the_text() -> None:
    fields = [merge.driver_field("b.io"), merge.capacity_field("z"), merge.PRICE, merge.capacity_field("a"),
              merge.driver_field("a.io")]
    assert [str(f) for f in sorted(fields)] == sorted(str(f) for f in fields)


def test_fields_are_values() -> None:
    assert merge.capacity_field("x") == merge.Field(merge.Kind.CAPACITY, "x")
    assert merge.capacity_field("x") != merge.driver_field("x")
    assert len({merge.PRICE, merge.Field(merge.Kind.PRICE), merge.capacity_field("x")}) == 2


def test_path_points_into_the_overlay() -> None:
    priced = cs.overlay("a", price="1", capacity={GPU: "1"}, dynamicResources=_templates("a.io", "b.io"))
    adjusted = cs.overlay("b", priceAdjustment="+1")
    assert findings.json_path(*merge.PRICE.path(priced)) == "spec.price"
    assert findings.json_path(*merge.PRICE.path(adjusted)) == "spec.priceAdjustment"
    assert findings.json_path(*merge.capacity_field(GPU).path(priced)) == "spec.capacity['example.com/gpu']"
    assert merge.driver_field("b.io").path(priced) == \
        ("spec", "dynamicResources", "resourceSliceTemplates", 1, "spec", "driver")


def test_paths_are_rendered_by_their_own_segments_whatever_was_rendered_before() -> None:
    # json_path keeps what it rendered: a YAML key True is not the index 1, nor a key "1".
    assert [findings.json_path(*p) for p in (("spec", 1), ("spec", True), ("spec", "1"), ("spec", 1))] == \
        ["spec[1]", "spec[True]", "spec.1", "spec[1]"]


def test_entry_fields_are_typed(small_catalog: Any) -> None:
    g: cells.Grid = cs.grid(small_catalog)
    o = cs.overlay("a", price="1", capacity={GPU: "1"}, dynamicResources=_templates("a.io"))
    (entry,) = cs.entries(g, o)
    assert set(entry.fields()) == {merge.PRICE, merge.capacity_field(GPU), merge.driver_field("a.io")}


def test_states_render_as_karpenter_names() -> None:
    assert [str(s) for s in merge.State] == ["Applied", "Conflict", "Invalid"]
    assert json.dumps({"status": merge.CONFLICT}) == '{"status": "Conflict"}'
    assert merge.APPLIED == "Applied"


def test_status_of_an_unknown_overlay_is_invalid(small_catalog: Any) -> None:
    known = rp.Status(merge.CONFLICT, "conflicts with b on price")
    report = rp.Report((), {"a": known}, merge.Merged((), {}, {}, ()), {}, {}, cs.grid(small_catalog), ())
    assert report.status_of("a") == known
    assert report.status_of("missing") == rp.Status(merge.INVALID, "")
