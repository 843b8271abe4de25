"""fuzz/growth.py: shapes read from bytes, and the search's verdict on growth it is shown."""

from __future__ import annotations

import pytest

from fuzz import growth


def test_a_shape_is_read_from_any_bytes_and_makes_its_size() -> None:
    assert growth.Shape.from_bytes(b"") == growth.Shape.from_bytes(bytes(8))
    shape = growth.Shape.from_bytes(bytes([3, 4, 1, 5, 1, 2, 7, 1]))
    docs = shape.documents(40, ["a", "b", "c"])
    overlays = [d for d in docs if d["kind"] == "NodeOverlay"]
    assert len(overlays) == 40 and len(docs) - 40 == shape.pools
    assert {o["spec"]["weight"] for o in overlays} == set(range(1, shape.weights + 1)) & set(range(1, 41))
    assert all(len(o["spec"]["requirements"]) == 1 + shape.scoped + 2 * shape.split + shape.extra for o in overlays)


@pytest.mark.parametrize(("power", "status"), [(1, 0), (2, 1)])
def test_the_search_reports_growth_past_the_limit(monkeypatch: pytest.MonkeyPatch, power: int, status: int) -> None:
    monkeypatch.setattr(growth, "cost", lambda shape, n: float(n ** power))
    [(value, _)] = growth.search(0, n=10, keep=1)
    assert value == pytest.approx(power)
    assert growth.main(["--seconds", "0", "--n", "10"]) == status


def test_the_core_measures_a_real_shape() -> None:
    assert growth.cost(growth.Shape(), 20) > 0
