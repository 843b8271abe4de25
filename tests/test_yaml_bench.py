"""The reading benchmark compares the same work on both sides."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks import yaml_bench
from sources import fastyaml, tree


@pytest.mark.parametrize("family", ["long-requirements", "ladder"])
def test_yaml_and_json_read_the_same_objects(family: str) -> None:
    got = yaml_bench.reading(family, count=40, rounds=1)
    assert set(got) == {"json_s", "yaml_s", "ratio"} and got["ratio"] > 0


def test_a_reader_that_loses_an_object_fails_it(monkeypatch: pytest.MonkeyPatch) -> None:
    real = tree._yaml

    def fewer(text: str) -> Any:
        return list(real(text))[:-1]

    monkeypatch.setattr(tree, "_yaml", fewer)
    monkeypatch.setattr(fastyaml, "documents", lambda text: None)
    with pytest.raises(AssertionError, match="different objects"):
        yaml_bench.reading("ladder", count=40, rounds=1)
