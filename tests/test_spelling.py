"""The nearest word among many (simulation/semantics/spelling.py) is difflib's own answer over all of them."""

from __future__ import annotations

import difflib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulation.semantics import spelling

_WORDS = st.text(alphabet="ab.-1xé", max_size=8)


@pytest.mark.parametrize("few", [0, spelling.FEW])
@given(words=st.lists(_WORDS, max_size=40, unique=True), also=st.sets(_WORDS, max_size=3), word=_WORDS,
       cutoff=st.sampled_from([0.0, 0.6, 0.8, 1.0]))
def test_the_closest_word_is_the_one_difflib_finds(few: int, words: list[str], also: set[str], word: str,
                                                   cutoff: float) -> None:
    """Through the letter-count table (`few` 0: every size takes it) and without it, ties and empty words
    included."""
    saved, spelling.FEW = spelling.FEW, few
    try:
        found = spelling.Words(words).closest(word, cutoff, also)
    finally:
        spelling.FEW = saved
    wanted = difflib.get_close_matches(word, sorted({*words, *also}), n=1, cutoff=cutoff)
    assert found == (wanted[0] if wanted else None)


@pytest.mark.parametrize(("word", "near"), [("x12.size3O", "x12.size3"), ("x100.size0", "x10.size0"),
                                            ("nothing-alike", None)])
def test_a_misspelt_instance_type_among_thousands_is_named(word: str, near: str | None) -> None:
    words = [f"x{i // 100}.size{i % 100}" for i in range(3000)]
    found = difflib.get_close_matches(word, words, n=1, cutoff=0.8)
    assert spelling.Words(words).closest(word, 0.8) == near == (found[0] if found else None)


@pytest.mark.parametrize("words", [["ax", "ay"], ["ay", "ax"]])
def test_a_tie_goes_to_the_word_difflib_keeps(monkeypatch: pytest.MonkeyPatch, words: list[str]) -> None:
    """Equal ratios, equal bounds: the word later in order wins, however the table orders them."""
    monkeypatch.setattr(spelling, "FEW", 0)
    assert spelling.Words(words).closest("a", 0.6) == "ay" == difflib.get_close_matches("a", words, n=1, cutoff=0.6)[0]
