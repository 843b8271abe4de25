"""findings.Finding's own __init__ (written for speed) against the dataclass it stands in for."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from simulation import findings

REF = findings.ObjectRef("NodeOverlay", "a")
OTHER = findings.ObjectRef("NodeOverlay", "b")
WITNESS = findings.Witness("default", "m5.large", findings.Offering("us-east-1a", "spot"))


def test_init_takes_every_field_in_order_with_its_default() -> None:
    params = list(inspect.signature(findings.Finding.__init__).parameters.values())[1:]
    fields = dataclasses.fields(findings.Finding)
    assert [p.name for p in params] == [f.name for f in fields]
    assert [p.default for p in params] == [
        inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default for f in fields]


def test_a_finding_is_a_frozen_value_of_its_fields() -> None:
    full = findings.Finding("shadowed", REF, ("spec", "price"), "m", (OTHER,), WITNESS, findings.Severity.WARNING,
                            3, (("k", "v"),), "h")
    by_name = findings.Finding(code="shadowed", obj=REF, path=("spec", "price"), message="m", related=(OTHER,),
                               witness=WITNESS, severity=findings.Severity.WARNING, source=3, detail=(("k", "v"),),
                               hint="h")
    assert full == by_name and hash(full) == hash(by_name)
    assert dataclasses.asdict(full)["hint"] == "h" and full.field == "spec.price"
    # The kept sort key is no field: a finding read before equals one never read.
    assert full.order_key and full == by_name
    with pytest.raises(dataclasses.FrozenInstanceError):
        full.message = "x"  # type: ignore[misc]
    bare = findings.Finding("shadowed", REF, ("spec", "price"), "m")
    assert (bare.related, bare.witness, bare.severity, bare.source, bare.detail, bare.hint) == \
        ((), None, findings.Severity.ERROR, None, (), "")
    assert dataclasses.replace(full, message="n") == findings.Finding(
        "shadowed", REF, ("spec", "price"), "n", (OTHER,), WITNESS, findings.Severity.WARNING, 3, (("k", "v"),), "h")
    assert full != bare and repr(bare).startswith("Finding(code='shadowed'")
