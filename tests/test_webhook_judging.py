"""judging.few_items: a review body small enough to vouch for its candidate's size without walking it.

The bound must never let through a candidate `usual` would refuse (it decides what runs on the event loop);
it may refuse ones `usual` accepts, which are then counted."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.strategies import examples
from tests.webhook_support import overlay
from webhook import judging, review

# Text with the JSON structure characters, escapes and wide characters in it.
TEXT = st.text(st.sampled_from([",", "[", "{", '"', "\\", "a", "é", "😀", "\n"]), max_size=150)
JSON = st.recursive(st.none() | st.booleans() | st.integers() | TEXT,
                    lambda inner: st.lists(inner, max_size=40) | st.dictionaries(TEXT, inner, max_size=40),
                    max_leaves=150)


def body(obj: dict[str, Any], *, name: str = "", compact: bool = False, ascii_only: bool = True) -> bytes:
    gvk = {"group": "karpenter.sh", "version": "v1alpha1", "kind": "NodeOverlay"}
    review_ = {"apiVersion": review.API_VERSION, "kind": review.KIND,
               "request": {"uid": "u", "kind": gvk, "resource": {"resource": "nodeoverlays"}, "name": name,
                           "operation": "CREATE", "object": obj, "oldObject": None}}
    return json.dumps(review_, separators=(",", ":") if compact else None, ensure_ascii=ascii_only).encode()


@settings(max_examples=examples(80), deadline=None)
@given(st.dictionaries(TEXT, JSON, max_size=30), JSON, st.booleans(), st.booleans(), st.booleans(), TEXT)
def test_a_body_it_vouches_for_has_a_usual_candidate(
        obj: dict[str, Any], metadata: Any, with_meta: bool, compact: bool, ascii_only: bool, generate: str) -> None:
    obj = {k: v for k, v in obj.items() if k not in ("kind", "apiVersion", "metadata")}
    if with_meta:
        # Dict metadata only (triage refuses any other before judging), with a generateName to copy from.
        obj["metadata"] = {"generateName": generate, "x": metadata}
    data = body(obj, compact=compact, ascii_only=ascii_only)
    candidate = review.candidate(review.parse(data))
    if judging.few_items(data):
        assert judging.usual(candidate)


def test_a_usual_review_is_vouched_for_and_a_large_one_is_not() -> None:
    assert judging.few_items(body(dict(overlay("a", price="1"))))
    many = overlay("b", price="1")
    many["spec"]["requirements"] = [{"key": "team", "operator": "In", "values": [str(i) for i in range(600)]}]
    assert not judging.few_items(body(many)) and not judging.usual(many)
    long = overlay("c", price="1")
    long["metadata"]["annotations"] = {"note": "x" * 64 * (judging.INLINE_ITEMS + 1)}
    assert not judging.few_items(body(long))
    # Just under the bound by item count: vouched for; one more item and it is not.
    near = overlay("d", price="1")
    data = body(near, compact=True)
    spare = judging.INLINE_ITEMS - (len(data) - len(data.translate(None, b",[{")) + judging.ADDED_ITEMS
                                    + (2 * len(data) + 64) // 64)
    assert spare > 2
    near["spec"]["x"] = [0] * (spare // 2)
    assert judging.few_items(body(near, compact=True))
    near["spec"]["x"] = [0] * (spare + 1)
    assert not judging.few_items(body(near, compact=True))


def test_first_members_count_as_well_as_the_ones_after_commas() -> None:
    """Single-member containers: items that no comma precedes."""
    nested = overlay("e", price="1")
    nested["spec"]["x"] = [[0]] * (judging.INLINE_ITEMS // 2)
    assert not judging.usual(nested)
    assert not judging.few_items(body(nested, compact=True))
