"""simulation.once: Once worked out on the first read, then read from the instance as cached_property does; Each a
mapping whose values are worked out on their keys' first reads."""

from __future__ import annotations

import dataclasses
import functools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulation import once


@dataclasses.dataclass(frozen=True)
class _Box:
    value: int
    calls: list[int] = dataclasses.field(default_factory=list, compare=False)

    @once.Once
    def doubled(self) -> int:
        """Twice the value."""
        self.calls.append(self.value)
        return self.value * 2

    @functools.cached_property
    def doubled_cached(self) -> int:
        return self.value * 2


@given(st.integers(), st.integers(min_value=1, max_value=5))
def test_once_reads_as_cached_property(value: int, reads: int) -> None:
    box = _Box(value)
    assert [box.doubled for _ in range(reads)] == [box.doubled_cached] * reads
    assert box.calls == [value]  # worked out once, on a frozen instance
    assert box.__dict__["doubled"] == value * 2


def test_once_on_the_class_is_the_descriptor() -> None:
    assert isinstance(_Box.doubled, once.Once)
    assert _Box.doubled.__doc__ == "Twice the value."


def test_a_value_set_in_the_instance_is_read_back() -> None:
    box = _Box(3)
    box.__dict__["doubled"] = 7  # as merge.share_tested gives alike entries one value
    assert box.doubled == 7 and box.calls == []


@given(st.lists(st.text(max_size=3), unique=True), st.lists(st.text(max_size=3)))
def test_each_reads_as_the_dict_it_stands_for_making_each_value_once(keys: list[str], reads: list[str]) -> None:
    made: list[str] = []

    def make(key: str) -> int:
        made.append(key)
        return len(key) * 2 + 1

    each = once.Each(dict.fromkeys(keys), make)
    whole = {k: len(k) * 2 + 1 for k in keys}
    for key in [*reads, *reads]:
        assert (key in each) == (key in whole)
        assert each.get(key) == whole.get(key)
    assert sorted(made) == sorted(set(reads) & set(keys))  # only the keys read, each once
    assert list(each) == keys and len(each) == len(keys) and dict(each) == whole


def test_each_has_no_value_outside_its_keys() -> None:
    each = once.Each({"a"}, str.upper)
    with pytest.raises(KeyError):
        each["b"]
