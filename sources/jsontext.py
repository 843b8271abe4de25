"""JSON input read by the standard library's C decoder, as kubectl reads it, with positions found
only when a finding asks for one.

kubectl (sigs.k8s.io/yaml's YAMLOrJSONDecoder) reads a stream that starts with `{` as a stream of
JSON objects and anything else as YAML. The YAML reader (`tree`) would give the same values, tens of
times slower: a 10,000-object `kind: List` written by a script is the common large input. Its line
and column marks are rebuilt here on demand by skipping over sibling values with the C scanner, once
per container, so a run with few findings pays for few positions.

Anything this reader is not sure of — duplicate keys, `NaN`, nesting deeper than the limit, a syntax
error — is left to the YAML reader, which refuses it with a position. Surrogate escapes are read as
Go's decoder reads them: a pair is one character, a lone one becomes U+FFFD.
"""

from __future__ import annotations

import array
import bisect
import itertools
import json
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

Path = tuple[str | int, ...]
Position = tuple[int, int]

_WS = re.compile(r"[ \t\n\r]*")
# A surrogate escape: Python's decoder pairs them, and leaves a lone one that cannot be printed.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")
_STRING = re.compile(rb'"[^"]*"')
_NOT_BRACKETS_OR_QUOTES = bytes(c for c in range(256) if c not in b'[]{}"')
# A byte's step in depth as a signed byte (0xff is -1); anything else left (a stray quote) is no step.
_STEPS = bytes(1 if c in b"[{" else 0xFF if c in b"]}" else 0 for c in range(256))
_ONE_KIND = bytes(ord("[") if c in b"[{" else ord("]") if c in b"]}" else c for c in range(256))
# Rounds of deleting innermost bracket pairs tried before summing steps: a deeper file costs a pass a round.
_ROUNDS = 16
_DECODER = json.JSONDecoder()
# The C string scanner (the decoder keeps it as an attribute; the module does not declare it).
_scanstring: Any = getattr(json.decoder, "scanstring")  # noqa: B009


class NotPlain(Exception):
    """Valid JSON that reads differently from YAML, or that the YAML reader should refuse."""


class Decoder:
    """A decoder for one text that refuses what YAML reads otherwise and keeps one object per distinct string
    value (a file's objects repeat theirs: `NotIn`, a label key, a family). What it met is at hand afterwards:
    `strings`, every distinct string value, and `keys`, every distinct key (the C scanner already keeps one
    object per key). `parse_int`, `parse_float`: as json's, and may refuse a number with NotPlain."""

    def __init__(self, parse_int: Callable[[str], Any] | None = None,
                 parse_float: Callable[[str], Any] | None = None) -> None:
        self.strings: dict[str, str] = {}
        self.keys: set[str] = set()
        share = self.strings.setdefault
        note = self.keys.update

        def shared(items: list[Any]) -> list[Any]:
            return [share(v, v) if type(v) is str else shared(v) if type(v) is list else v for v in items]

        def pairs(found: list[tuple[str, Any]]) -> dict[str, Any]:
            out = {}
            for key, value in found:
                kind = type(value)
                if kind is str:
                    value = share(value, value)
                elif kind is list:
                    value[:] = shared(value)
                out[key] = value
            if len(out) != len(found):
                raise NotPlain("duplicate key")
            note(out)
            return out

        self._shared = shared
        self._json = json.JSONDecoder(object_pairs_hook=pairs, parse_constant=_constant, parse_int=parse_int,
                                      parse_float=parse_float)

    def raw_decode(self, text: str, start: int) -> tuple[Any, int]:
        """The JSON value at `start`, and where it ends."""
        value, end = self._json.raw_decode(text, start)
        # Objects were seen to as they were built; a string or list outside any is not yet.
        if type(value) is str:
            value = self.strings.setdefault(value, value)
        elif type(value) is list:
            value = self._shared(value)
        return value, end

    def decode(self, text: str) -> Any:
        """The one JSON value of `text`."""
        value, end = self.raw_decode(text, _skip(text, 0))
        if _skip(text, end) != len(text):
            raise ValueError("extra data after the JSON value")
        return value


def _constant(name: str) -> Any:
    raise NotPlain(name)


def documents(text: str, max_depth: int) -> list[tuple[Any, Located]] | None:
    """Every JSON value of a stream of JSON objects, each with its positions; None when the text is
    not one (or is one the YAML reader must judge)."""
    start = _skip(text, 0)
    if not text.startswith("{", start) or too_deep(text, max_depth):
        return None
    index = Index(text)
    lone = _SURROGATE_ESCAPE.search(text)
    out: list[tuple[Any, Located]] = []
    strict = Decoder()
    try:
        while start < len(text):
            value, end = strict.raw_decode(text, start)
            out.append((value if lone is None else _replaced(value), Located(index, start)))
            start = _skip(text, end)
    except (ValueError, NotPlain, RecursionError):
        return None
    return out


def _text_of(value: str) -> str:
    """A string with each lone surrogate replaced (it cannot be printed or encoded)."""
    return value if _SURROGATE.search(value) is None else _SURROGATE.sub("\ufffd", value)


def _replaced(value: Any) -> Any:
    """`value` with lone surrogates replaced in every string, keys included (depth is bounded by the caller)."""
    if isinstance(value, str):
        return _text_of(value)
    if isinstance(value, list):
        return [_replaced(v) for v in value]
    if isinstance(value, dict):
        return {_text_of(k): _replaced(v) for k, v in value.items()}
    return value


def _skip(text: str, i: int) -> int:
    """The offset of the first non-whitespace character at or after `i`."""
    found = _WS.match(text, i)
    return found.end() if found is not None else i


def too_deep(text: str | bytes | bytearray, max_depth: int) -> bool:
    """Nesting deeper than `max_depth`, judged with C-speed operations on the UTF-8 bytes: escaped
    backslashes and quotes go first, then everything but brackets and quotes, then strings (most are
    empty by then, and two adjacent quotes can go as a pair however they pair up), then the brackets' innermost
    pairs, a level a round."""
    raw = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    if b"\\" in raw:
        raw = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    skeleton = raw.translate(None, _NOT_BRACKETS_OR_QUOTES)
    # When every quote pairs with the next, no string held a bracket (the first that did would leave its opening
    # quote unpaired) and the quotes go in one pass, not a replacement of each pair.
    if skeleton.count(b'"') == 2 * skeleton.count(b'""'):
        brackets = skeleton.translate(None, b'"')
    else:
        skeleton = skeleton.replace(b'""', b"")
        brackets = _STRING.sub(b"", skeleton) if b'"' in skeleton else skeleton
    # Each round deletes the innermost pairs, one level: a file's usual nesting (6 to 12) is gone in a few rounds,
    # each on fewer brackets, cheaper than the running sum below.
    level = brackets.translate(_ONE_KIND)
    for _ in range(min(max_depth, _ROUNDS)):
        level = level.replace(b"[]", b"")
    if not level:
        return False
    # Each bracket as a signed byte, +1 or -1, summed up in C (a generator call each was most of the cost).
    steps = array.array("b", brackets.translate(_STEPS))
    return max(itertools.accumulate(steps), default=0) > max_depth


class Index:
    """Offsets in one text: of each container's members (filled in as asked for) and of its lines."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._members: dict[int, _Members] = {}
        self._lines: list[int] | None = None

    def _container(self, offset: int) -> _Members:
        found = self._members.get(offset)
        if found is None:
            found = self._members[offset] = _Members(self.text, offset, self._members)
        return found

    def members(self, offset: int) -> dict[str | int, tuple[int, int]]:
        """Key or index -> (where it is reported, where its value starts) for the container at `offset`."""
        return self._container(offset).every()

    def member(self, offset: int, step: str | int) -> tuple[int, int] | None:
        """members(offset).get(step), the members after it left unscanned."""
        return self._container(offset).get(step)

    def value_at(self, root: int, path: Path) -> tuple[int, int] | None:
        """(reported, value) offsets of `path` under the value at `root`."""
        found = (root, root)
        for step in path:
            entry = self.member(found[1], step)
            if entry is None:
                return None
            found = entry
        return found

    def position(self, offset: int) -> Position:
        if self._lines is None:
            self._lines = [m.end() for m in re.finditer("\n", self.text)]
        line = bisect.bisect_right(self._lines, offset)
        start = self._lines[line - 1] if line else 0
        return line + 1, offset - start + 1


class _Members:
    """A container's members, scanned as far as asked: a member's value is skipped (by the C decoder, which builds
    it) only to reach the members after it. A finding's path names one member at each level, so the values around
    it (an overlay's hundred requirements, the rest of a `kind: List`) are mostly never decoded again. A value whose
    members were scanned already (a `kind: List`'s item a finding was in) is skipped by finishing that scan, not
    decoded whole again."""

    def __init__(self, text: str, offset: int, scanned: dict[int, _Members]) -> None:
        self._text = text
        self._object = text[offset] == "{"
        self._scanned = scanned
        self.found: dict[str | int, tuple[int, int]] = {}
        # Where the scan stands: the next member's start, or (`_skipping`) the last one's value, still to skip.
        self._at = _skip(text, offset + 1) if text[offset] in "{[" else -1
        self._skipping = False
        # Where the container ends, once the scan has reached its closing bracket.
        self.end = -1

    def get(self, step: str | int) -> tuple[int, int] | None:
        found = self.found
        while step not in found and self._at >= 0:
            self._next()
        return found.get(step)

    def every(self) -> dict[str | int, tuple[int, int]]:
        while self._at >= 0:
            self._next()
        return self.found

    def ended(self) -> int:
        """Where the container ends (its members scanned to the last)."""
        self.every()
        return self.end

    def _next(self) -> None:
        text, i = self._text, self._at
        if self._skipping:
            inner = self._scanned.get(i) if text[i] in "{[" else None
            end = inner.ended() if inner is not None else _DECODER.raw_decode(text, i)[1]
            i = _skip(text, end)
            if text[i] == ",":
                i = _skip(text, i + 1)
        if text[i] in "}]":
            self._at, self.end = -1, i + 1
            return
        if self._object:
            key_at = i
            key, i = _scanstring(text, i + 1)
            i = _skip(text, _skip(text, i) + 1)  # the colon
            self.found[key] = (key_at, i)
        else:
            self.found[len(self.found)] = (i, i)
        self._at, self._skipping = i, True


class _Part:
    """The value at `prefix` under the value at `root`, found when first asked for: a `kind: List` of
    thousands of items gets one of these per item, and a clean run never looks."""

    def __init__(self, index: Index, root: int, prefix: Path = ()) -> None:
        self._index = index
        self._root = root
        self._prefix = prefix
        self._start: int | None = None if prefix else root

    def _at(self, path: Path) -> tuple[int, int] | None:
        if self._start is None:
            found = self._index.value_at(self._root, self._prefix)
            self._start = found[1] if found is not None else -1
        return self._index.value_at(self._start, path) if self._start >= 0 else None

    def _paths(self) -> Iterator[Path]:
        found = self._at(())
        stack: list[tuple[Path, int]] = [] if found is None else [((), found[1])]
        while stack:
            path, offset = stack.pop()
            yield path
            stack += [((*path, k), value) for k, (_, value) in self._index.members(offset).items()]


class Located(_Part, Mapping[Path, Position]):
    """The positions of one JSON value's parts, as the YAML reader records them: a key's for a
    mapping member, the item's own for a list item."""

    def __getitem__(self, path: Path) -> Position:
        found = self._at(path)
        if found is None:
            raise KeyError(path)
        return self._index.position(found[0])

    def __iter__(self) -> Iterator[Path]:
        return self._paths()

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def within(self, path: Path) -> Located:
        """The positions of the value at `path`, relative to it (an item of a `kind: List`)."""
        return Located(self._index, self._root, (*self._prefix, *path))

    def literals(self) -> Literals:
        return Literals(self._index, self._root, self._prefix)


class Literals(_Part, Mapping[Path, str]):
    """The text of each number and boolean, as written: where a string belongs, the message quotes it."""

    def __getitem__(self, path: Path) -> str:
        found = self._at(path)
        if found is None:
            raise KeyError(path)
        text = self._index.text
        value, end = _DECODER.raw_decode(text, found[1])
        if isinstance(value, str | list | dict) or value is None:
            raise KeyError(path)
        return text[found[1]:end]

    def __iter__(self) -> Iterator[Path]:
        return (p for p in self._paths() if p in self)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def within(self, path: Path) -> Literals:
        return Literals(self._index, self._root, (*self._prefix, *path))
