"""YAML text to plain JSON-like trees, with the line and column of every key and item.

Built from ruamel.yaml's parse events rather than its composer/constructor: both of those
recurse once per nesting level, and construction happens before anyone could count what an
alias expands to. Walking the event stream with an explicit stack lets one pass refuse a
document that nests too deep or whose aliases would expand past a budget (billion laughs),
before the core ever walks it. Aliases share the anchored object instead of copying it, so
memory stays linear; the budget protects whoever walks the tree afterwards.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterator, Mapping
from typing import Any

from ruamel.yaml import YAML, events
from ruamel.yaml.error import YAMLError
from ruamel.yaml.nodes import ScalarNode
from ruamel.yaml.resolver import VersionedResolver

from sources import jsontext

Path = tuple[str | int, ...]
Position = tuple[int, int]  # 1-based line and column

MAX_DEPTH = 100
# Nodes a document may gain through aliases (each alias counts the full size of what it names).
ALIAS_BUDGET = 100_000

_TAG = "tag:yaml.org,2002:"
_SURROGATE = re.compile("[\ud800-\udfff]")
# kubectl reads YAML with go-yaml, whose implicit typing is YAML 1.1's (`on`, `yes` are booleans).
_RESOLVERS = {(1, 1): VersionedResolver(version=(1, 1)), (1, 2): VersionedResolver(version=(1, 2))}
# Runs of opening brackets. The scanner looks ahead up to 1024 characters for a possible simple
# key at every flow level, which is quadratic on a long run: such a file is refused up front.
# The pattern cannot backtrack (whitespace and brackets are disjoint), so the scan is linear.
_BRACKET_RUN = re.compile(r"[\[{](?:[ \t\r\n]*[\[{]){7,}")


@dataclasses.dataclass(frozen=True)
class Problem:
    message: str
    position: Position


@dataclasses.dataclass
class Parsed:
    """One YAML document: its tree and positions, or the reason it was refused."""

    index: int
    value: Any = None
    # Filled in as the document is read (YAML), or found when asked for (JSON).
    positions: Mapping[Path, Position] = dataclasses.field(default_factory=dict)
    problem: Problem | None = None
    # Unquoted scalars that YAML typed as a boolean or number, with the text as written: where a
    # string belongs, the user meant the text (`team: on`) and is told to quote it.
    plain: Mapping[Path, str] = dataclasses.field(default_factory=dict)


class _Refused(Exception):
    def __init__(self, message: str, position: Position, *, fatal: bool = False) -> None:
        super().__init__(message)
        self.problem = Problem(message, position)
        # A fatal refusal ends the file: the parser cannot be trusted to skip what follows cheaply.
        self.fatal = fatal


@dataclasses.dataclass
class _Frame:
    container: dict[str, Any] | list[Any]
    path: Path
    anchor: str | None
    size: int = 1
    key: str | None = None
    key_pos: Position | None = None
    # The pending key is `<<`: its value is merged in, and explicit keys override it.
    merge_key: bool = False
    merge_pos: Position | None = None
    merged: dict[str, Any] = dataclasses.field(default_factory=dict)


def _pos(event: Any) -> Position:
    mark = event.start_mark
    return (mark.line + 1, mark.column + 1)


def position_of(text: str, offset: int) -> Position:
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def _error_position(err: YAMLError, text: str) -> Position:
    for attr in ("problem_mark", "context_mark"):
        mark = getattr(err, attr, None)
        if mark is not None:
            return (mark.line + 1, mark.column + 1)
    offset = getattr(err, "position", None)  # ReaderError: a character YAML does not allow
    return position_of(text, offset) if isinstance(offset, int) else (1, 1)


def _error_message(err: YAMLError) -> str:
    problem = getattr(err, "problem", None)
    context = getattr(err, "context", None)
    if problem:
        return f"{problem} ({context})" if context else str(problem)
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip() and not ln.startswith(" ")]
    return lines[0] if lines else type(err).__name__


_INT_PREFIXES = {"0b": 2, "0o": 8, "0x": 16}


def _to_int(text: str, version: tuple[int, int]) -> int:
    raw = text.replace("_", "")
    sign = -1 if raw.startswith("-") else 1
    raw = raw.lstrip("+-")
    if ":" in raw:  # YAML 1.1 sexagesimal
        total = 0
        for part in raw.split(":"):
            total = total * 60 + int(part)
        return sign * total
    base = _INT_PREFIXES.get(raw[:2].lower())
    if base is not None:
        return sign * int(raw[2:], base)
    if version == (1, 1) and len(raw) > 1 and raw.startswith("0"):
        return sign * int(raw, 8)
    return sign * int(raw)


def _to_float(text: str) -> float:
    raw = text.replace("_", "").lower()
    if raw.lstrip("+-") == ".inf":
        return -math.inf if raw.startswith("-") else math.inf
    if raw == ".nan":
        return math.nan
    if ":" in raw:
        sign = -1.0 if raw.startswith("-") else 1.0
        total = 0.0
        for part in raw.lstrip("+-").split(":"):
            total = total * 60 + float(part)
        return sign * total
    return float(raw)


def text_of(value: str) -> str:
    """`\\ud83d\\ude00` escapes come out of the scanner as two surrogates: pair them as JSON
    decoders do, and replace a lone one (it cannot be printed or encoded)."""
    if _SURROGATE.search(value) is None:
        return value
    return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def scalar(event: events.ScalarEvent, version: tuple[int, int]) -> Any:
    """The JSON value kubectl would send for a scalar."""
    tag = None if event.tag is None else str(event.tag)
    value = text_of(event.value)
    if tag is None or tag == "!":
        if event.style is not None or tag == "!":
            return value
        tag = str(_RESOLVERS[version].resolve(ScalarNode, value, (True, False)))
    if not tag.startswith(_TAG):
        return value  # an application tag: go-yaml keeps the text
    name = tag[len(_TAG):]
    try:
        if name == "null":
            return None
        if name == "bool":
            return value.lower() in ("true", "yes", "on", "y")
        if name == "int":
            return _to_int(value, version)
        if name == "float":
            return _to_float(value)
    except ValueError:
        raise _Refused(f"{value!r} is not a valid !!{name}", _pos(event)) from None
    return value


class _Builder:
    """Folds the events of one document into a tree; the stack replaces recursion."""

    def __init__(self, index: int, version: tuple[int, int]) -> None:
        self.positions: dict[Path, Position] = {}
        self.plain: dict[Path, str] = {}
        self.parsed = Parsed(index, positions=self.positions, plain=self.plain)
        self.version = version
        self.stack: list[_Frame] = []
        self.anchors: dict[str, tuple[Any, int]] = {}
        self.open_anchors: set[str] = set()
        self.aliased = 0

    def feed(self, event: Any) -> None:
        if isinstance(event, events.AliasEvent):
            self._alias(event)
        elif isinstance(event, events.ScalarEvent):
            self._scalar(event)
        elif isinstance(event, (events.MappingStartEvent, events.SequenceStartEvent)):
            self._start(event)
        elif isinstance(event, (events.MappingEndEvent, events.SequenceEndEvent)):
            self._end()

    def _wants_key(self) -> _Frame | None:
        top = self.stack[-1] if self.stack else None
        return top if top is not None and isinstance(top.container, dict) and top.key is None else None

    def _child_path(self, pos: Position) -> Path:
        if not self.stack:
            self.positions[()] = pos
            return ()
        top = self.stack[-1]
        if isinstance(top.container, list):
            path = (*top.path, len(top.container))
            self.positions[path] = pos
            return path
        assert top.key is not None
        return (*top.path, top.key)

    def _attach(self, value: Any, size: int, pos: Position) -> None:
        if not self.stack:
            self.parsed.value = value
            return
        top = self.stack[-1]
        top.size += size
        if isinstance(top.container, list):
            top.container.append(value)
            return
        key, top.key = top.key, None
        assert key is not None
        if top.merge_key:
            top.merge_key = False
            sources = value if isinstance(value, list) else [value]
            if not all(isinstance(s, dict) for s in sources):
                raise _Refused("a '<<' merge key takes a mapping or a list of mappings", pos)
            for source in sources:
                for k, v in source.items():
                    top.merged.setdefault(k, v)
        elif key in top.container:
            first = self.positions.get((*top.path, key), pos)
            raise _Refused(f"duplicate key {key!r} (first at line {first[0]})", top.key_pos or pos)
        else:
            top.container[key] = value
            if top.key_pos is not None:
                self.positions[(*top.path, key)] = top.key_pos

    def _alias(self, event: events.AliasEvent) -> None:
        pos = _pos(event)
        name = event.anchor
        if name in self.open_anchors:
            raise _Refused(f"alias *{name} refers to a node that contains it (recursive)", pos)
        if name not in self.anchors:
            raise _Refused(f"alias *{name} is not defined", pos)
        if self._wants_key() is not None:
            raise _Refused("an alias cannot be a mapping key here", pos)
        value, size = self.anchors[name]
        self.aliased += size
        if self.aliased > ALIAS_BUDGET:
            raise _Refused(f"aliases expand to more than {ALIAS_BUDGET} nodes (an alias bomb?); "
                           "document refused", pos)
        self._child_path(pos)
        self._attach(value, size, pos)

    def _scalar(self, event: events.ScalarEvent) -> None:
        pos = _pos(event)
        top = self._wants_key()
        if top is not None:
            top.key, top.key_pos = text_of(event.value), pos
            top.merge_key = event.value == "<<" and event.style is None and event.tag is None
            if top.merge_key:
                top.merge_pos = pos
            return
        value = scalar(event, self.version)
        self._remember(event.anchor, value, 1)
        path = self._child_path(pos)
        if event.style is None and event.tag is None and isinstance(value, bool | int | float):
            self.plain[path] = event.value
        self._attach(value, 1, pos)

    def _start(self, event: events.CollectionStartEvent) -> None:
        pos = _pos(event)
        if self._wants_key() is not None:
            raise _Refused("mapping keys must be scalars (JSON has no complex keys)", pos)
        if len(self.stack) >= MAX_DEPTH:
            raise _Refused(f"nesting deeper than {MAX_DEPTH} levels; the rest of the file is not read",
                           pos, fatal=True)
        path = self._child_path(pos)
        container: dict[str, Any] | list[Any] = {} if isinstance(event, events.MappingStartEvent) else []
        if event.anchor is not None:
            self.open_anchors.add(event.anchor)
        self.stack.append(_Frame(container, path, event.anchor))

    def _end(self) -> None:
        frame = self.stack.pop()
        container = frame.container
        if isinstance(container, dict):
            for k, v in frame.merged.items():
                if k not in container:
                    container[k] = v
                    if frame.merge_pos is not None:
                        self.positions[(*frame.path, k)] = frame.merge_pos
        if frame.anchor is not None:
            self.open_anchors.discard(frame.anchor)
        self._remember(frame.anchor, container, frame.size)
        self._attach(container, frame.size, self.positions.get(frame.path, (1, 1)))

    def _remember(self, anchor: str | None, value: Any, size: int) -> None:
        if anchor is not None:
            self.anchors[anchor] = (value, size)


def _version(event: events.DocumentStartEvent) -> tuple[int, int]:
    version = getattr(event, "version", None)
    return (1, 2) if version is not None and tuple(version) >= (1, 2) else (1, 1)


def documents(text: str) -> Iterator[Parsed]:
    """Every document of a YAML stream (or of a stream of JSON objects, read as kubectl reads them).
    A refused document carries a problem; a syntax error ends the stream (the parser cannot
    resynchronise), with one last refused document."""
    for run in _BRACKET_RUN.finditer(text):
        if run.group().count("[") + run.group().count("{") > MAX_DEPTH:
            yield Parsed(0, problem=Problem(f"nesting deeper than {MAX_DEPTH} levels; file refused",
                                            position_of(text, run.start())))
            return
    fast = jsontext.documents(text, MAX_DEPTH)
    if fast is not None:
        yield from (Parsed(i, value, located, problem=None, plain=located.literals())
                    for i, (value, located) in enumerate(fast))
        return
    yield from _yaml(text)


def _yaml(text: str) -> Iterator[Parsed]:
    # The plain parser: the round-trip one yields the same events and marks but also gathers
    # comments, which costs a third more and is of no use here.
    stream = YAML(typ="safe", pure=True).parse(text)
    reading = _Stream()
    try:
        for event in stream:
            done = reading.feed(event)
            if done is not None:
                yield done
            if reading.ended:
                return
    except YAMLError as err:
        yield Parsed(reading.index, problem=Problem(_error_message(err), _error_position(err, text)))
    except RecursionError:
        yield Parsed(reading.index, problem=Problem(f"nesting too deep to read (limit {MAX_DEPTH})", (1, 1)))
    finally:
        stream.close()


class _Stream:
    """Events to documents: one builder per document; a refused document is skipped to its end."""

    def __init__(self) -> None:
        self.index = 0
        self.builder: _Builder | None = None
        self.skipping = False
        self.ended = False

    def feed(self, event: Any) -> Parsed | None:
        if isinstance(event, events.DocumentStartEvent):
            self.builder, self.skipping = _Builder(self.index, _version(event)), False
            return None
        if isinstance(event, events.DocumentEndEvent):
            done = self.builder.parsed if self.builder is not None and not self.skipping else None
            self.index += 1
            self.builder = None
            return done
        if self.builder is None or self.skipping:
            return None
        try:
            self.builder.feed(event)
        except _Refused as refused:
            self.skipping = True
            self.ended = refused.fatal
            return dataclasses.replace(self.builder.parsed, value=None, positions={}, plain={},
                                       problem=refused.problem)
        return None
