"""YAML text to plain JSON-like trees, with the line and column of every key and item.

libyaml (PyYAML's C parser) scans and parses; this module folds its event stream into trees,
rather than using a composer/constructor: those recurse once per nesting level, and construction
happens before anyone could count what an alias expands to. Walking the events with an explicit
stack lets one pass refuse a document that nests too deep or whose aliases would expand past a
budget (billion laughs), before the core ever walks it. Aliases share the anchored object instead
of copying it, so memory stays linear; the budget protects whoever walks the tree afterwards.
Scalars are typed as kubectl types them (`scalars`): go-yaml v2's YAML 1.1, then JSON.
"""

from __future__ import annotations

import array
import contextlib
import dataclasses
import re
import threading
import typing
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import yaml
from yaml import events

from sources import jsontext, scalars

Path = tuple[str | int, ...]
Position = tuple[int, int]  # 1-based line and column

MAX_DEPTH = 100
# Characters from which a YAML text is tried with rapidyaml first (`fastyaml`): below, importing it costs more
# than it saves (about 13 ms, the libyaml reading of some 40 kB). Texts read before count towards it: a repository
# of one overlay a file reads as much YAML as one large file.
FAST_FROM = 1 << 16
# Characters from which a text is worth rapidyaml's fixed cost per text (about 50 us, libyaml's reading of some
# 400 characters), once the texts read so far have paid for its import.
FAST_SMALL = 512
# Nodes a document may gain through aliases (each alias counts the full size of what it names).
ALIAS_BUDGET = 100_000

# libyaml where PyYAML was built with it (the wheels are); its pure-Python twin gives the same events.
_LOADER: Any = getattr(yaml, "CBaseLoader", yaml.BaseLoader)
# Runs of opening brackets. The scanner looks ahead up to 1024 characters for a possible simple
# key at every flow level, which is quadratic on a long run: such a file is refused up front.
# The pattern cannot backtrack (whitespace and brackets are disjoint), so the scan is linear.
_BRACKET_RUN = re.compile(r"[\[{](?:[ \t\r\n]*[\[{]){7,}")
# Whether there is such a run deeper than MAX_DEPTH, at C speed (the search above is about 5 ns a character): with
# the whitespace deleted and every other character but an opening bracket made a `.`, a run is a row of `[`.
_RUN_WHITESPACE = b" \t\r\n"
_RUN_TABLE = bytes(ord("[") if c in b"[{" else ord(".") for c in range(256))



class Spares:
    """Parse trees of rapidyaml (`fastyaml`) kept from one file for the next while a reading lasts (`reading`).
    A fresh tree's node array (40 MB for 500 long overlays) costs half the parse in page faults alone; kept past the
    reading, it would add as much to the peak memory of the judgement after it. A thread takes a tree of its own."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open = 0
        self._kept: list[Any] = []

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        """Trees given back meanwhile are kept, until the last reading open ends."""
        with self._lock:
            self._open += 1
        try:
            yield
        finally:
            with self._lock:
                self._open -= 1
                if not self._open:
                    self._kept.clear()

    @property
    def keeping(self) -> bool:
        """Whether a tree given back now would be kept (a reading is open)."""
        return bool(self._open)

    def take(self) -> Any | None:
        """A tree kept, or None."""
        with self._lock:
            return self._kept.pop() if self._kept else None

    def give(self, spare: Any) -> None:
        """A tree no longer used: kept while a reading is open, else let go."""
        with self._lock:
            if self._open:
                self._kept.append(spare)


SPARES = Spares()


class _Volume:
    """How much YAML the process has read, to tell when importing rapidyaml has paid off (`FAST_FROM`). Another
    thread's count may be lost in a race: the switch comes a text later, the values are the same either way."""

    def __init__(self) -> None:
        self.read = 0

    def fast(self, size: int) -> bool:
        """Whether a text of `size` characters is tried with rapidyaml first."""
        if size < FAST_SMALL and size < FAST_FROM:
            return False
        self.read += size
        return size >= FAST_FROM or self.read >= FAST_FROM


_VOLUME = _Volume()
# Files read meanwhile share the fast reader's parse trees (a run's files: `objects.Loader.load`).
reading = SPARES.reading


@dataclasses.dataclass(frozen=True)
class Problem:
    """Why a document was refused, and where."""

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


@dataclasses.dataclass(slots=True)
class _Frame:
    """An open mapping or sequence while events are folded into a tree."""

    container: dict[str, Any] | list[Any]
    path: Path
    anchor: str | None
    is_map: bool
    size: int = 1
    key: str | None = None
    key_pos: Position | None = None
    # The pending key is `<<`: its value is merged in, and explicit keys override it.
    merge_key: bool = False
    merge_pos: Position | None = None
    merged: dict[str, Any] | None = None


def _pos(event: Any) -> Position:
    mark = event.start_mark
    return (mark.line + 1, mark.column + 1)


def position_of(text: str, offset: int) -> Position:
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def _error_position(err: yaml.YAMLError, text: str) -> Position:
    for attr in ("problem_mark", "context_mark"):
        mark = getattr(err, attr, None)
        if mark is not None:
            return (mark.line + 1, mark.column + 1)
    offset = getattr(err, "position", None)  # ReaderError: a character YAML does not allow
    return position_of(text, offset) if isinstance(offset, int) else (1, 1)


def _error_message(err: yaml.YAMLError) -> str:
    problem = getattr(err, "problem", None)
    context = getattr(err, "context", None)
    if problem:
        return f"{problem} ({context})" if context else str(problem)
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip() and not ln.startswith(" ")]
    return lines[0] if lines else type(err).__name__


def _value(event: events.ScalarEvent) -> Any:
    """The JSON value kubectl would send for a scalar."""
    tag = event.tag
    if tag is None:
        return scalars.plain(event.value) if event.implicit[0] else event.value
    return event.value if tag == "!" else scalars.tagged(tag, event.value)


def _key_text(event: events.ScalarEvent) -> str:
    """A mapping key as kubectl sends it."""
    tag = event.tag
    try:
        if tag is None:
            return scalars.plain_key(event.value) if event.implicit[0] else event.value
        return event.value if tag == "!" else scalars.key(scalars.tagged(tag, event.value))
    except scalars.Unsendable as err:
        raise _Refused(str(err), _pos(event)) from None


class _Folding:
    """The one loop over a document's events, for both folds: scalars, by far the most common, are tested first."""

    def read(self, next_event: Callable[[], Any]) -> Parsed:
        """The document whose events `next_event` gives, up to its end; _Refused if it is refused."""
        while True:
            event = next_event()
            cls = type(event)
            if cls is events.ScalarEvent:
                self._scalar(event)
            elif cls is events.MappingStartEvent or cls is events.SequenceStartEvent:
                self._start(event, cls is events.MappingStartEvent)
            elif cls is events.MappingEndEvent or cls is events.SequenceEndEvent:
                self._end()
            elif cls is events.AliasEvent:
                self._alias(event)
            elif cls is events.DocumentEndEvent:
                return self._parsed()

    def _scalar(self, event: events.ScalarEvent) -> None:
        raise NotImplementedError

    def _start(self, event: events.CollectionStartEvent, is_map: bool) -> None:
        raise NotImplementedError

    def _end(self) -> None:
        raise NotImplementedError

    def _alias(self, event: events.AliasEvent) -> None:
        raise NotImplementedError

    def _parsed(self) -> Parsed:
        raise NotImplementedError


class _Builder(_Folding):
    """Folds the events of one document into a tree; the stack replaces recursion. The loop is
    written for speed (tens of events per object): scalars, by far the most common, are handled inline."""

    def __init__(self, index: int) -> None:
        self.positions: dict[Path, Position] = {}
        self.plain: dict[Path, str] = {}
        self.parsed = Parsed(index, positions=self.positions, plain=self.plain)
        self.stack: list[_Frame] = []
        self.anchors: dict[str, tuple[Any, int]] = {}
        self.open_anchors: set[str] = set()
        self.aliased = 0

    def _parsed(self) -> Parsed:
        return self.parsed

    def _scalar(self, event: events.ScalarEvent) -> None:
        mark: Any = event.start_mark
        pos = (mark.line + 1, mark.column + 1)
        stack = self.stack
        top = stack[-1] if stack else None
        if top is not None and top.is_map and top.key is None:
            self._key(top, event, pos)
            return
        try:
            value = _value(event)
        except scalars.Unsendable as err:
            raise _Refused(str(err), pos) from None
        if event.anchor is not None:
            self.anchors[event.anchor] = (value, 1)
        if top is None:
            self.positions[()] = pos
            self.parsed.value = value
            return
        if top.is_map:
            key = typing.cast(str, top.key)
            path: Path = (*top.path, key)
        else:
            path = (*top.path, len(top.container))
            self.positions[path] = pos
        if event.tag is None and type(value) in _TYPED and event.implicit[0]:
            self.plain[path] = event.value
        container = top.container
        if top.is_map and not top.merge_key and key not in container:
            # The common case inline: a new key's value (a merge or a duplicate takes the general path).
            typing.cast(dict[str, Any], container)[key] = value
            self.positions[path] = typing.cast(Position, top.key_pos)
            top.key = None
            top.size += 1
            return
        self._attach(top, value, 1, pos)

    def _key(self, top: _Frame, event: events.ScalarEvent, pos: Position) -> None:
        top.key_pos = pos
        if event.value == "<<" and event.tag is None and event.implicit[0]:
            top.key, top.merge_key, top.merge_pos = "<<", True, pos
            return
        top.key = _key_text(event)

    def _child_path(self, pos: Position) -> Path:
        if not self.stack:
            self.positions[()] = pos
            return ()
        top = self.stack[-1]
        if not top.is_map:
            path = (*top.path, len(top.container))
            self.positions[path] = pos
            return path
        assert top.key is not None
        return (*top.path, top.key)

    def _attach(self, top: _Frame | None, value: Any, size: int, pos: Position) -> None:
        if top is None:
            self.parsed.value = value
            return
        top.size += size
        container = top.container
        if not top.is_map:
            typing.cast(list[Any], container).append(value)
            return
        key, top.key = top.key, None
        assert key is not None and isinstance(container, dict)
        if top.merge_key:
            top.merge_key = False
            self._merge(top, value, pos)
        elif key in container:
            first = self.positions.get((*top.path, key), pos)
            raise _Refused(f"duplicate key {key!r} (first at line {first[0]})", top.key_pos or pos)
        else:
            container[key] = value
            if top.key_pos is not None:
                self.positions[(*top.path, key)] = top.key_pos

    @staticmethod
    def _merge(top: _Frame, value: Any, pos: Position) -> None:
        sources = value if isinstance(value, list) else [value]
        if not all(isinstance(s, dict) for s in sources):
            raise _Refused("a '<<' merge key takes a mapping or a list of mappings", pos)
        merged = top.merged if top.merged is not None else {}
        top.merged = merged
        for source in sources:
            for k, v in source.items():
                merged.setdefault(k, v)

    def _top(self) -> _Frame | None:
        return self.stack[-1] if self.stack else None

    def _alias(self, event: events.AliasEvent) -> None:
        pos = _pos(event)
        name = event.anchor
        top = self._top()
        if name in self.open_anchors:
            raise _Refused(f"alias *{name} refers to a node that contains it (recursive)", pos)
        if name not in self.anchors:
            raise _Refused(f"alias *{name} is not defined", pos)
        if top is not None and top.is_map and top.key is None:
            raise _Refused("an alias cannot be a mapping key here", pos)
        value, size = self.anchors[name]
        self.aliased += size
        if self.aliased > ALIAS_BUDGET:
            raise _Refused(f"aliases expand to more than {ALIAS_BUDGET} nodes (an alias bomb?); "
                           "document refused", pos)
        self._child_path(pos)
        self._attach(top, value, size, pos)

    def _start(self, event: events.CollectionStartEvent, is_map: bool) -> None:
        pos = _pos(event)
        top = self._top()
        if top is not None and top.is_map and top.key is None:
            raise _Refused("mapping keys must be scalars (JSON has no complex keys)", pos)
        if len(self.stack) >= MAX_DEPTH:
            raise _Refused(f"nesting deeper than {MAX_DEPTH} levels; the rest of the file is not read",
                           pos, fatal=True)
        path = self._child_path(pos)
        if event.anchor is not None:
            self.open_anchors.add(event.anchor)
        self.stack.append(_Frame({} if is_map else [], path, event.anchor, is_map))

    def _end(self) -> None:
        frame = self.stack.pop()
        container = frame.container
        if frame.merged is not None:
            assert isinstance(container, dict)
            for k, v in frame.merged.items():
                if k not in container:
                    container[k] = v
                    if frame.merge_pos is not None:
                        self.positions[(*frame.path, k)] = frame.merge_pos
        if frame.anchor is not None:
            self.open_anchors.discard(frame.anchor)
            self.anchors[frame.anchor] = (container, frame.size)
        self._attach(self._top(), container, frame.size, self.positions.get(frame.path, (1, 1)))


# A position packed in one unsigned 64-bit number: the 0-based line above, the column below.
_LINE = 1 << 32


def _unpacked(packed: int) -> Position:
    return (packed // _LINE + 1, packed % _LINE + 1)


@dataclasses.dataclass
class _Seen:
    """What a file's documents repeat, read once each: plain keys and scalars as typed, and one object per string
    (`key`, `operator`, a label key, `NotIn`: a copy each was most of a tree's memory)."""

    keys: dict[str, str] = dataclasses.field(default_factory=dict)
    plains: dict[str, Any] = dataclasses.field(default_factory=dict)
    strings: dict[str, str] = dataclasses.field(default_factory=dict)


class _Open:
    """A mapping or list being read: its parent and its place there stand for its path, asked only for a scalar
    YAML typed (`plain`)."""

    __slots__ = ("at", "container", "first", "is_map", "key", "parent")

    def __init__(self, container: dict[str, Any] | list[Any], parent: _Open | None, at: str | int,
                 first: int) -> None:
        self.container, self.parent, self.at, self.first = container, parent, at, first
        self.is_map = type(container) is dict
        self.key: str | None = None

    def path(self) -> Path:
        steps: list[str | int] = []
        frame: _Open | None = self
        while frame is not None and frame.parent is not None:
            steps.append(frame.at)
            frame = frame.parent
        return tuple(reversed(steps))


_MISSING = object()


class _InOrder(_Folding):
    """Folds the events of a document with no anchor, alias or merge key (most of them; `documents` sends the
    others to `_Builder`). Such a tree holds its nodes in the order of the text, so one packed position per node,
    in that order, stands for the map from path to position (`Marks`): 8 bytes a node, against a path and a
    position tuple in a dict (some 250 bytes), and no path built per scalar. Errors are those `_Builder` finds,
    in the same order: a mapping or a list joins its parent when it ends."""

    def __init__(self, index: int, seen: _Seen) -> None:
        self.index = index
        self.seen = seen
        self.marks = array.array("Q")
        # Bound once: looked up per scalar otherwise.
        self.mark, self.keys, self.plains = self.marks.append, seen.keys, seen.plains
        self.plain: dict[Path, str] = {}
        self.stack: list[_Open] = []
        self.root: Any = None

    def _parsed(self) -> Parsed:
        return Parsed(self.index, self.root, Marks(self.root, self.marks), plain=self.plain)

    def _scalar(self, event: events.ScalarEvent) -> None:
        at: Any = event.start_mark
        stack = self.stack
        top = stack[-1] if stack else None
        text = event.value
        typed = event.tag is None and event.implicit[0]
        if top is not None and top.is_map and top.key is None:
            self.mark(at.line * _LINE + at.column)
            key = self.keys.get(text) if typed else None
            top.key = key if key is not None else self._key(event, typed)
            return
        value = self.plains.get(text, _MISSING) if typed else _MISSING
        if value is _MISSING:
            value = self._value(event, typed)
        if top is None:
            self.mark(at.line * _LINE + at.column)
            self.root = value
            return
        container: Any = top.container
        if typed and type(value) in _TYPED:
            self.plain[(*top.path(), top.key if top.key is not None else len(container))] = text
        if not top.is_map:
            self.mark(at.line * _LINE + at.column)
            container.append(value)
        elif top.key not in container:
            container[top.key] = value
            top.key = None
        else:
            self._duplicate(top, len(self.marks) - 1)

    def _key(self, event: events.ScalarEvent, typed: bool) -> str:
        key = _key_text(event)
        key = self.seen.strings.setdefault(key, key)
        if typed:
            self.seen.keys[event.value] = key
        return key

    def _value(self, event: events.ScalarEvent, typed: bool) -> Any:
        try:
            value = _value(event)
        except scalars.Unsendable as err:
            raise _Refused(str(err), _pos(event)) from None
        if type(value) is str:
            value = self.seen.strings.setdefault(value, value)
        if typed:
            self.seen.plains[event.value] = value
        return value

    def _start(self, event: events.CollectionStartEvent, is_map: bool) -> None:
        stack = self.stack
        top = stack[-1] if stack else None
        place: str | int = 0
        if top is not None:
            if top.is_map and top.key is None:
                raise _Refused("mapping keys must be scalars (JSON has no complex keys)", _pos(event))
            place = top.key if top.key is not None else len(top.container)
        if len(stack) >= MAX_DEPTH:
            raise _Refused(f"nesting deeper than {MAX_DEPTH} levels; the rest of the file is not read",
                           _pos(event), fatal=True)
        if top is None or not top.is_map:  # a mapping's value is at its key, marked already
            at: Any = event.start_mark
            self.marks.append(at.line * _LINE + at.column)
        stack.append(_Open({} if is_map else [], top, place, len(self.marks) - 1))

    def _end(self) -> None:
        stack = self.stack
        done = stack.pop()
        if not stack:
            self.root = done.container
            return
        top = stack[-1]
        container: Any = top.container
        if not top.is_map:
            container.append(done.container)
        elif top.key not in container:
            container[top.key] = done.container
            top.key = None
        else:
            self._duplicate(top, done.first)

    def _duplicate(self, top: _Open, key_mark: int) -> None:
        """Refuses the document: the key pending in `top`, marked at `key_mark`, is there already."""
        first = Marks(top.container, self.marks, top.first)[(typing.cast(str, top.key),)]
        raise _Refused(f"duplicate key {top.key!r} (first at line {first[0]})", _unpacked(self.marks[key_mark]))


def _size(value: Any) -> int:
    """The nodes of a tree: itself and everything under it."""
    kind = type(value)
    if kind is dict:
        return 1 + sum(map(_size, value.values()))
    if kind is list:
        return 1 + sum(map(_size, value))
    return 1


class Marks(Mapping[Path, Position]):
    """The positions of a tree `_InOrder` read, one per node in the order of the text: a path's position is found
    by walking the tree to it (a finding asks for a few). The tree keeps its shape after reading (the reader's
    repairs replace scalars by scalars)."""

    __slots__ = ("_at", "_marks", "_value")

    def __init__(self, value: Any, marks: array.array[int], at: int = 0) -> None:
        self._value, self._marks, self._at = value, marks, at

    def _find(self, path: Path) -> tuple[Any, int] | None:
        node, at = self._value, self._at
        for step in path:
            at += 1
            if type(node) is dict:
                if step not in node:
                    return None
                for key, child in node.items():
                    if key == step:
                        break
                    at += _size(child)
                node = node[step]
            elif type(node) is list and type(step) is int and 0 <= step < len(node):
                at += sum(map(_size, node[:step]))
                node = node[step]
            else:
                return None
        return node, at

    def __getitem__(self, path: Path) -> Position:
        found = self._find(path)
        if found is None:
            raise KeyError(path)
        return _unpacked(self._marks[found[1]])

    def __iter__(self) -> Iterator[Path]:
        todo: list[tuple[Path, Any]] = [((), self._value)]
        while todo:
            path, node = todo.pop()
            yield path
            children = node.items() if type(node) is dict else enumerate(node) if type(node) is list else ()
            todo.extend(reversed([((*path, k), child) for k, child in children]))

    def __len__(self) -> int:
        return _size(self._value)

    def within(self, path: Path) -> Mapping[Path, Position]:
        """The positions of the value at `path`, relative to it (an item of a `kind: List`)."""
        found = self._find(path)
        return {} if found is None else Marks(found[0], self._marks, found[1])


# Values that an unquoted scalar turned into something other than a string.
_TYPED = frozenset({bool, int, float})


def documents(text: str) -> Iterator[Parsed]:
    """Every document of a YAML stream (or of a stream of JSON objects, read as kubectl reads them).
    A refused document carries a problem; a syntax error ends the stream (the parser cannot
    resynchronise), with one last refused document."""
    deep = b"[" * (MAX_DEPTH + 1) in text.encode("utf-8", "surrogatepass").translate(_RUN_TABLE, _RUN_WHITESPACE)
    for run in _BRACKET_RUN.finditer(text) if deep else ():
        if run.group().count("[") + run.group().count("{") > MAX_DEPTH:
            yield Parsed(0, problem=Problem(f"nesting deeper than {MAX_DEPTH} levels; file refused",
                                            position_of(text, run.start())))
            return
    fast = jsontext.documents(text, MAX_DEPTH)
    if fast is not None:
        yield from (Parsed(i, value, located, problem=None, plain=located.literals())
                    for i, (value, located) in enumerate(fast))
        return
    if _VOLUME.fast(len(text)):
        from sources import fastyaml

        read = fastyaml.documents(text)
        if read is not None:
            yield from read
            return
    yield from _yaml(text)


def _yaml(text: str) -> Iterator[Parsed]:
    # An anchor needs a `&`, an alias a `*` and a merge key `<<`: a text with none of them is read in order.
    in_order = "&" not in text and "*" not in text and "<<" not in text
    seen = _Seen() if in_order else None
    loader = _LOADER(text)
    index = 0
    try:
        while True:
            event = loader.get_event()
            if event is None or isinstance(event, events.StreamEndEvent):
                return
            if not isinstance(event, events.DocumentStartEvent):
                continue
            try:
                yield _document(index, event, loader.get_event, seen)
            except _Refused as refused:
                yield Parsed(index, problem=refused.problem)
                if refused.fatal:
                    return
                _skip_document(loader.get_event)
            index += 1
    except yaml.YAMLError as err:
        yield Parsed(index, problem=Problem(_error_message(err), _error_position(err, text)))
    finally:
        loader.dispose()


def _document(index: int, start: events.DocumentStartEvent, next_event: Callable[[], Any],
              seen: _Seen | None = None) -> Parsed:
    """`seen`: read in order (`_InOrder`), with what the file's earlier documents held."""
    if start.version is not None and tuple(start.version) != (1, 1):
        # go-yaml v2 (kubectl) refuses the document and ends the stream there.
        major, minor = start.version
        raise _Refused(f"found incompatible YAML document (%YAML {major}.{minor}): kubectl reads YAML 1.1 "
                       "only; remove the directive", _pos(start), fatal=True)
    return (_InOrder(index, seen) if seen is not None else _Builder(index)).read(next_event)


def located(text: str, path: Path) -> dict[Path, Position]:
    """The positions of `path` and of those of its ancestors present, in the first document of `text` (one `_yaml`
    reads in order: no anchor, alias or duplicate key), as `Marks` has them; libyaml's events are read only as far
    as the path, and the mappings and lists beside it are skipped."""
    loader = _LOADER(text)
    try:
        node = loader.get_event()
        while not isinstance(node, events.NodeEvent):
            node = loader.get_event()
        found: dict[Path, Position] = {(): _pos(node)}
        for depth, step in enumerate(path):
            member = _member(loader.get_event, node, step)
            if member is None:
                break
            found[path[:depth + 1]], node = member
        return found
    finally:
        loader.dispose()


def _member(next_event: Callable[[], Any], node: Any, step: str | int) -> tuple[Position, Any] | None:
    """Where the member `step` of the collection `node` is (a key's position, an item's own), and its first
    event; None if it has none."""
    is_map = isinstance(node, events.MappingStartEvent)
    if not (is_map or (isinstance(node, events.SequenceStartEvent) and type(step) is int)):
        return None
    index = 0
    while True:
        event = next_event()
        if isinstance(event, events.CollectionEndEvent):
            return None
        if is_map:
            value = next_event()
            if _key_text(event) == step:
                return _pos(event), value
            _skip_node(next_event, value)
        elif index == step:
            return _pos(event), event
        else:
            _skip_node(next_event, event)
            index += 1


def _skip_node(next_event: Callable[[], Any], node: Any) -> None:
    depth = int(isinstance(node, events.CollectionStartEvent))
    while depth:
        event = next_event()
        depth += isinstance(event, events.CollectionStartEvent) - isinstance(event, events.CollectionEndEvent)


def _skip_document(next_event: Callable[[], Any]) -> None:
    while not isinstance(next_event(), events.DocumentEndEvent):
        pass
