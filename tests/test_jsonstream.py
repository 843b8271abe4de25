"""lint.jsonstream writes what json.dumps(indent=2) writes for the whole document, whatever the document's
shape around its streamed list and however many chunks the list takes."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lint import jsonstream
from tests.strategies import examples

SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8)
# Keys are mostly strings; an int key (json.dumps turns it into a string) and tuples (written as lists) take
# the encoder's fallback.
KEYS = st.text(max_size=5) | st.integers(0, 3)
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3) | st.lists(inner, max_size=2).map(tuple)
                      | st.dictionaries(KEYS, inner, max_size=3), max_leaves=12)
# Some lists cross a chunk boundary, or two.
ITEMS = st.lists(VALUES, max_size=4) | st.integers(jsonstream.CHUNK - 1, 2 * jsonstream.CHUNK + 1).map(
    lambda n: [{"n": i, "text": "a\nb"} for i in range(n)])


@st.composite
def placed(draw: st.DrawFn) -> tuple[Any, list[Any], Any]:
    """A document with the slot somewhere in it, the list, and the same document with the list there instead."""
    items = draw(ITEMS)
    slotted: Any = jsonstream.SLOT
    whole: Any = items
    for _ in range(draw(st.integers(1, 3))):
        siblings = draw(st.dictionaries(st.text(max_size=5), VALUES, max_size=2))
        key = draw(st.text(max_size=5))
        siblings.pop(key, None)
        if draw(st.booleans()):
            slotted, whole = {**siblings, key: slotted}, {**siblings, key: whole}
        else:
            before = draw(st.lists(VALUES, max_size=2))
            slotted, whole = [*before, {key: slotted}], [*before, {key: whole}]
    return slotted, items, whole


@settings(max_examples=examples(150))
@given(placed())
def test_streamed_equals_dumped(case: tuple[Any, list[Any], Any]) -> None:
    slotted, items, whole = case
    out = io.StringIO()
    jsonstream.write(out, slotted, iter(items))
    assert out.getvalue() == json.dumps(whole, indent=2) + "\n"


def test_a_document_without_its_slot_is_refused() -> None:
    with pytest.raises(ValueError):
        jsonstream.write(io.StringIO(), {"findings": []}, [])
