"""The word nearest a misspelt one among many (a label key's thousands of values): difflib's
`get_close_matches(word, words, n=1, cutoff)`, without a pass of Python over every word. No rule.

difflib bounds each word's exact ratio by its `quick_ratio` (twice the letters the two share, counted with
repeats, over their summed lengths); here that bound is computed for every word at once from a table of letter
counts (numpy, made on the first question), and exact ratios are taken in the order of the bound only until it
falls below the best one found.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any

from simulation import once

# Up to this many words, difflib reads them all: the table costs more than they do.
FEW = 256


class Words:
    def __init__(self, words: Iterable[str]) -> None:
        self._words = tuple(words)

    @once.Once
    def _table(self) -> tuple[Any, dict[str, int], Any]:
        """Per word its count of each letter (a column per letter), the columns by letter, and the words' lengths."""
        import numpy as np  # only for a key with many values (arrays.py)

        lengths = np.fromiter(map(len, self._words), dtype=np.int64, count=len(self._words))
        letters = np.frombuffer("".join(self._words).encode("utf-32-le"), dtype=np.uint32)
        columns, column_of = np.unique(letters, return_inverse=True)
        rows = np.repeat(np.arange(len(self._words)), lengths)
        counts = np.bincount(rows * len(columns) + column_of, minlength=len(self._words) * len(columns))
        return counts.reshape(len(self._words), len(columns)), {chr(c): i for i, c in enumerate(columns.tolist())}, \
            lengths

    def closest(self, word: str, cutoff: float, also: Iterable[str] = ()) -> str | None:
        """difflib.get_close_matches(word, these words and `also`, n=1, cutoff)[0], or None: the words in order of
        their quick_ratio (a bound of the exact ratio, as difflib computes it), exact ratios taken until the bound
        falls below the best found (ties go to the word later in order, as there)."""
        if len(self._words) <= FEW:
            found = difflib.get_close_matches(word, [*self._words, *also], n=1, cutoff=cutoff)
            return found[0] if found else None
        import numpy as np

        counts, column, lengths = self._table
        wanted = np.zeros(counts.shape[1], dtype=np.int32)
        for letter in word:
            if letter in column:
                wanted[column[letter]] += 1
        total = lengths + len(word)
        # difflib's _calculate_ratio: 2.0 * matches / length, and 1.0 for two empty strings.
        bound = np.where(total > 0, 2.0 * np.minimum(counts, wanted).sum(axis=1) / np.maximum(total, 1), 1.0)
        kept = np.flatnonzero(bound >= cutoff)
        kept = kept[np.argsort(-bound[kept], kind="stable")]
        # `also` (a few) first, untested by the table.
        order = [(1.0, w) for w in also] + list(zip(bound[kept].tolist(), (self._words[i] for i in kept.tolist()),
                                                    strict=True))
        matcher = difflib.SequenceMatcher()
        matcher.set_seq2(word)
        best: tuple[float, str] | None = None
        for most, candidate in order:
            if best is not None and most < best[0]:
                break
            matcher.set_seq1(candidate)
            if matcher.real_quick_ratio() >= cutoff and matcher.quick_ratio() >= cutoff:
                ratio = matcher.ratio()
                if ratio >= cutoff and (best is None or (ratio, candidate) > best):
                    best = (ratio, candidate)
        return best[1] if best is not None else None
