"""Large YAML files read by rapidyaml (C++), when nothing in them can mean anything but what `tree` makes of it.

rapidyaml parses a file several times as fast as libyaml's events reach Python, and writes the tree as JSON,
which the standard library's C decoder reads: about the cost of reading the same objects from JSON. But it types
plain scalars as YAML 1.2 does, and kubectl as YAML 1.1 does (go-yaml v2, `scalars`): `yes`, `on`, `~`, `0755`,
`0x1F`, `1_000` stay strings in its JSON, `1e3` and `1.0` become floats, and it writes `nan` as `.nan`. A file is
read here only when none of that can happen:

- nothing the general reader exists for (anchors, aliases, merge keys, tags, directives, complex keys), and
  nothing where the two parsers read the syntax differently (tabs, backslash escapes, carriage returns,
  characters libyaml refuses or takes for line breaks, `@` and a backquote, a document end marker, a flow
  collection across lines, a `:` right before a flow indicator, a scalar opening with `]`, `}`, `:` or `?`:
  rapidyaml reads some such texts libyaml refuses; the fuzz target `fastyaml` looks for more);
- no string in the JSON that a plain scalar becomes and kubectl types otherwise (`yes`, `True`, `~`, `.inf`,
  `0755`; a key `null` or `-0`): a quoted one is as good, but the JSON does not say which it was. The decoder
  collects a file's distinct strings and keys as it shares them (`jsontext.Decoder`), and each is judged once;
- no number in the JSON but a decimal integer kubectl reads as the same integer (no float at all);
- no duplicate key, nothing nested deeper than rapidyaml writes (65 levels, below `tree.MAX_DEPTH`), and as many
  documents as the text's markers.

Anything else makes `documents` answer None, and `tree` reads the file (rapidyaml's own report of a parse error
is silenced: `_quiet`). Positions are found when a finding asks
for one, in the document's own text, by libyaml's events as far as the path asked for (`tree.located`). The text
of each number and boolean (`plain`) is the JSON's, which for a decimal integer or a boolean is the text as
written.
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import os
import re
import sys
import threading
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import re2
import ryml
import yaml

from sources import jsontext, scalars, tree
from sources.tree import Path, Position

# What the general reader handles, or where libyaml and rapidyaml read the same text differently. Conservative:
# a `*` in a quoted string sends its file to the general reader too. The ASCII ones, as a character class's body,
# are also looked for in the bytes (`_UNSURE`).
_ASCII_UNSURE = r"&*!@`\\\t\r\x00-\x08\x0b\x0c\x0e-\x1f\x7f"
_UNSURE_CHARACTER = re.compile(f"[{_ASCII_UNSURE}" + r"\x80-\x9f\u2028\u2029\ud800-\udfff\ufeff\ufffe\uffff]")


def _latin1(pattern: bytes) -> Any:
    """An RE2 pattern over bytes, each byte a character."""
    options = re2.Options()
    options.encoding = re2.Options.Encoding.LATIN1
    return re2.compile(pattern, options)


# Looked for in one pass of RE2's automaton over the UTF-8 bytes (1.7 ns a byte; the translations and searches it
# replaced cost 15 ms per 4 MB, Python's engine tries a pattern at every candidate character): the ASCII characters
# of `_UNSURE_CHARACTER` (the others are looked for only in a text that is not ASCII); a directive or a document end
# marker at a line's start (at the text's start: `_unsure`); a `:` right before a flow indicator (`s: [g:]`:
# rapidyaml reads an empty value, libyaml refuses it); a block sequence entry on the line of a quoted scalar or a
# flow collection (`- "" - x`, `- [] -`: libyaml refuses it, rapidyaml reads one more item). Latin-1: a byte is a
# character, and RE2's `$` is the end of the text only, where the final line break is matched by `[ \n]` anyway.
_UNSURE = b"[" + _ASCII_UNSURE.encode() + rb"]|\n%|\n\.\.\.|:[\]},]|[\"'\]}][ ]+-(?:[ \n]|$)"
_UNSURE_BYTES = _latin1(_UNSURE)
# In the same pass, the brackets of each line (`_flow_across_lines`) where they are flat, `[]{}[]`: a bracket left
# open at the line's end, closed by the other kind, or a closing one first on its line is unsure; an opening one
# after an opening one, or a closing one after a closing one, is nesting, which `_flow_across_lines` judges. Where
# neither is found, every line's brackets pair up in order and it need not (4 ms per 4 MB).
_BETWEEN = rb"[^\[\]{}\n]*"
_UNSURE_OR_NESTED = _latin1(
    b"(" + _UNSURE + rb"|[\[{]" + _BETWEEN + rb"(?:\n|$)|\[" + _BETWEEN + rb"\}|\{" + _BETWEEN + rb"\]|(?:^|\n)"
    + _BETWEEN + rb"[\]}])|[\[{]" + _BETWEEN + rb"[\[{]|[\]}]" + _BETWEEN + rb"[\]}]")
_NOT_BRACKETS = bytes(sorted(set(range(256)) - set(b"[]{}\n")))
_COMPLEX_KEY = re.compile(r"(?:^|[\s\[{,])\?(?:\s|$)")
# A `|` or `>` where a scalar may start, not followed by a block scalar's header alone (`>2.`): rapidyaml reads
# some such headers libyaml refuses. A plain scalar holding ` > ` is left to tree too.
# The indicator first, then what is before it: a pattern opening with a lookbehind is tried at every character.
_ODD_BLOCK_HEADER = re.compile(r"[|>](?<![^\s][|>])(?!(?:[1-9][-+]?|[-+][1-9]?)?[ ]*(?:#[^\n]*)?(?:\n|$))")
# A block scalar as a document's root: rapidyaml takes lines at column 0 for its text, libyaml refuses them.
_ROOT_BLOCK = re.compile(r"^(?:---[ ]+)?[|>]", re.MULTILINE)
_MARKER = "\n---"
_BLANK = re.compile(r"(?:[ ]*(?:#[^\n]*)?\n)*[ ]*(?:#[^\n]*)?")
# rapidyaml writes a plain `inf` or `infinity` as ".inf" (`-inf` as "-.inf", `nan` as ".nan"), which kubectl keeps
# as written: AWS's instance category `inf` is one. Undone where the text holds no other spelling of them (in any
# case: searched for in the text's bytes lowered, a regular expression ignoring case is ten times as slow).
_SPELLED = (b".inf", b".nan", b"infinity")
_SPECIAL = {".inf": "inf", "-.inf": "-inf", ".nan": "nan"}
# Strings of the JSON that plain scalars kubectl types otherwise become: the YAML 1.1 words (`true` and `false`
# excepted: plain, rapidyaml writes them as JSON's), and those that may be numbers to go-yaml, judged together
# (`_unsure_numbers`); and a string opening with an indicator (`]`, `}`, `:`, `?`, `%`, `#`, `|`, `>`, `,`), which
# rapidyaml may have read as a plain scalar where libyaml refuses one. Each distinct string of a file is judged
# once, as the decoder collected them (`jsontext.Decoder`), not each of its occurrences in the JSON.
_SPOKEN = frozenset(scalars.TABLE) - {"", "true", "false", "null"}
_NUMBER_LIKE = re.compile(r"[-+]?[._]*[0-9][-+0-9a-fA-FxXoObB._]*")
_NUMBER_FIRST = frozenset("-+._0123456789")  # what `_NUMBER_LIKE` may open with: a set lookup is cheaper
_INDICATORS = frozenset("]}:?%#|>,")
# Keys kubectl refuses: `null` and nothing.
_NULL_KEYS = frozenset({"null", ""})
# The least text a node of rapidyaml's tree takes in Kubernetes YAML (14.2 to 16.6 bytes in the benchmark's
# families): fewer nodes reserved cost one more doubling of the array, more cost their page faults.
_BYTES_PER_NODE = 14
# 19 characters at most: go-yaml reads such an integer as the same one (ParseInt, or ParseUint below 2^64).
_LONGEST_INT = 19


class _Unsure(Exception):
    """Something in the text rapidyaml's JSON may not say as kubectl would."""


def documents(text: str) -> list[tree.Parsed] | None:
    """Every document of a YAML stream, as `tree` reads them; None when `tree` must read it."""
    raw = text.encode("utf-8", "surrogatepass")  # a lone surrogate is one of the characters left to tree
    if _unsure(text, raw):
        return None
    if _BLANK.fullmatch(text):
        return []
    starts = _starts(text)
    try:
        values, literals = _read(raw, len(starts))
    except _Unsure:
        return None
    later = _Later(text, starts)
    # tree keeps the text of a typed plain scalar inside a mapping or a list only.
    return [tree.Parsed(i, value, Positions(later, i), plain=literals[i] if isinstance(value, dict | list) else {})
            for i, value in enumerate(values)]


def _unsure(text: str, raw: bytes) -> bool:
    """Whether `text` (`raw` in UTF-8) holds anything only the general reader reads as kubectl does."""
    if not raw.isascii() and _UNSURE_CHARACTER.search(text) is not None:
        return True
    found = _UNSURE_OR_NESTED.search(raw)
    # Nesting found first: what is unsure may be after it.
    if found is not None and (found.group(1) is not None or _UNSURE_BYTES.search(raw, found.start()) is not None):
        return True
    if text.startswith(("%", "...")) or ("<" in text and "<<" in text):
        return True
    # A block scalar that ends the text without a line break: rapidyaml gives it one.
    if ("|" in text or ">" in text) and (not text.endswith("\n") or _ODD_BLOCK_HEADER.search(text) is not None
                                         or _ROOT_BLOCK.search(text) is not None):
        return True
    return ("?" in text and _COMPLEX_KEY.search(text) is not None) or (found is not None and _flow_across_lines(raw))


def _flow_across_lines(raw: bytes) -> bool:
    """Whether a flow collection spans lines, which rapidyaml reads more freely than libyaml (a key may span lines
    there): the brackets alone, line by line, with each line's pairs removed until none is left, show it."""
    brackets = raw.translate(None, _NOT_BRACKETS)
    while True:
        paired = brackets.replace(b"[]", b"").replace(b"{}", b"")
        if len(paired) == len(brackets):
            return paired.translate(None, b"\n") != b""
        brackets = paired


def _starts(text: str) -> list[int]:
    """Where each document begins: at a `---` line, and before the first one if anything but comments is there."""
    starts = [0] if text.startswith("---") and text[3:4] in ("", " ", "\n") else []
    at = text.find(_MARKER)
    while at >= 0:
        if text[at + 4:at + 5] in ("", " ", "\n"):
            starts.append(at + 1)
        at = text.find(_MARKER, at + 4)
    if not starts or _BLANK.fullmatch(text, 0, starts[0]) is None:
        starts.insert(0, 0)
    return starts


def _read(raw: bytes, count: int) -> tuple[list[Any], list[jsontext.Literals]]:
    """The values of the `count` documents of a text (`raw`, its UTF-8), with the text of their numbers and
    booleans."""
    parsed = tree.SPARES.take()
    if parsed is None:
        parsed = ryml.Tree()
        # A tree to be kept for the reading's next files has its node array sized once: grown as the parse goes, it is
        # copied and faulted in at each doubling (a fresh tree's parse of 4 MB: 60 ms, not 37). A tree of one file is
        # left to grow: reserved, and freed right after, it left 36 MB more resident after ten files read alone.
        if tree.SPARES.keeping:
            parsed.reserve(len(raw) // _BYTES_PER_NODE)
    else:
        parsed.clear()
        parsed.clear_arena()
    try:
        with _quiet():
            ryml.parse_in_arena(raw, tree=parsed)
            # Nesting is not counted here: rapidyaml writes no tree deeper than 65 levels, below tree.MAX_DEPTH
            # (it reports a deeper one, 5 ms a 4 MB file cheaper than `jsontext.too_deep`), and tree reads it.
            written = _json(parsed, len(raw))
        root = parsed.root_id()
        stream = parsed.is_stream(root)
        documents = parsed.num_children(root) if stream else 1
    except Exception as err:  # rapidyaml raises its own classes (ExceptionParse...): tree reports the error
        raise _Unsure from err
    finally:
        tree.SPARES.give(parsed)
    if documents != count or not written:
        raise _Unsure
    emitted = written.decode()
    del parsed, written
    value, decoder = _decoded(emitted)
    # The decoder met every distinct string and key: a text without rapidyaml's spellings is not searched for them.
    if not (_SPECIAL.keys().isdisjoint(decoder.strings) and _SPECIAL.keys().isdisjoint(decoder.keys)):
        lowered = raw.lower()
        if any(spelled in lowered for spelled in _SPELLED):
            raise _Unsure
        for special, spelled in _SPECIAL.items():
            emitted = emitted.replace(f'"{special}"', f'"{spelled}"')
        value, decoder = _decoded(emitted)
    if not _NULL_KEYS.isdisjoint(decoder.keys) or _suspect(decoder.strings, False) or _suspect(decoder.keys, True):
        raise _Unsure
    index = jsontext.Index(emitted)
    at = len(emitted) - len(emitted.lstrip())
    if stream:
        return value, [jsontext.Literals(index, at, (i,)) for i in range(count)]
    return [value], [jsontext.Literals(index, at)]


def _decoded(emitted: str) -> tuple[Any, jsontext.Decoder]:
    """rapidyaml's JSON read, with the distinct strings and keys met."""
    decoder = jsontext.Decoder(parse_int=_integer, parse_float=_float)
    try:
        return decoder.decode(emitted), decoder
    except (ValueError, jsontext.NotPlain, RecursionError) as err:
        raise _Unsure from err


def _suspect(texts: Iterable[str], is_key: bool) -> bool:
    """Whether any string of the JSON may be a plain scalar kubectl reads otherwise."""
    numbers = []
    for text in texts:
        first = text[:1]
        if first in _INDICATORS or text in _SPOKEN:
            return True
        if first in _NUMBER_FIRST and _NUMBER_LIKE.fullmatch(text) is not None:
            numbers.append(text)
    return bool(numbers) and _unsure_numbers(numbers, is_key)


def _unsure_numbers(texts: list[str], is_key: bool) -> bool:
    """Whether any of these JSON strings, each looking like a number, may be a plain scalar kubectl reads otherwise.
    A key is always a string. A value: rapidyaml writes a plain decimal number unquoted, so a string `"2"` was
    quoted; `"0755"` may not have been. The values kubectl types are written by rapidyaml as one list, one parse per
    file rather than one per string (a price ladder has as many distinct prices as overlays)."""
    typed = []
    for text in texts:
        try:
            if is_key:
                if scalars.plain_key(text) != text:
                    return True
            elif not isinstance(scalars.plain(text), str):
                typed.append(text)
        except scalars.Unsendable:
            return True
    if not typed:
        return False
    # Such a text has no space, comma or quote: one item per line, and the flow list's items split at commas.
    listed = "".join(f"- {text}\n" for text in typed)
    try:
        with _quiet():
            written = _json(ryml.parse_in_arena(listed.encode()), len(listed)).decode()
    except Exception:  # rapidyaml's own classes
        return True
    items = written.strip().removeprefix("[").removesuffix("]").split(",")
    return len(items) != len(typed) or any(item.strip().startswith('"') for item in items)


def _json(parsed: Any, size: int) -> bytearray:
    """The tree of a `size`-byte text as JSON, written into a buffer of ours: `ryml.emit_json` never frees the one
    it allocates (twice the JSON's size lost per call, 14 MB per 3.7 MB file). The buffer is sized by a guess
    (asking for the exact size walks the tree as long as writing it does), and again only if the guess was short.
    rapidyaml writes a block collection as indented JSON, a flow one on a line: each document is made flow (its
    collections follow in the JSON), the same JSON 40% shorter to write, count and decode."""
    root = parsed.root_id()
    for document in ryml.children(parsed, root) if parsed.is_stream(root) else (root,):
        if parsed.is_container(document):
            parsed.set_container_style(document, ryml.FLOW_SL)
    out = bytearray(2 * size + 4096)
    short, length = ryml.emit_json_to_substr(parsed, parsed.root_id(), out)
    if short:
        out = bytearray(length)
        short, length = ryml.emit_json_to_substr(parsed, parsed.root_id(), out)
    del out[length:]
    return out


def _integer(text: str) -> int:
    if len(text) > _LONGEST_INT:
        raise jsontext.NotPlain(text)
    return int(text)


def _float(text: str) -> float:
    # `1.0` and `1e3` are integers to kubectl, `1e400` a string: not worth telling apart here.
    raise jsontext.NotPlain(text)


def _c_stderr() -> tuple[ctypes.c_void_p, int] | None:
    """The C library's `stderr` stream, where rapidyaml writes, and a stream writing to nowhere to put in its place:
    the GNU C library documents `stderr` as a variable a program may set. None for another C library."""
    try:
        version = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (AttributeError, ValueError, OSError):  # a system that cannot name its C library (macOS, Windows)
        version = ""
    if not version.startswith("glibc"):
        return None
    libc = ctypes.CDLL(None)
    libc.fopen.restype = ctypes.c_void_p
    libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    nowhere = libc.fopen(os.devnull.encode(), b"w")
    return (ctypes.c_void_p.in_dll(libc, "stderr"), nowhere) if nowhere else None


# rapidyaml's Python API installs no error callback of its own and offers none to install (its `Callbacks` and
# `set_callbacks` are not wrapped): its default prints a parse error to C's `stderr`, then raises.
_STDERR = _c_stderr()
# One quiet section at a time: two threads saving and restoring the same stream in turn would leave it silenced.
_QUIET = threading.Lock()


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """rapidyaml prints a parse error before raising it: the error is `tree`'s to report. C's `stderr` stream is
    pointed at /dev/null meanwhile; Python writes to file descriptor 2 directly, so another thread's log line is
    not lost. Where that stream cannot be set, file descriptor 2 is (a line written meanwhile is lost)."""
    with _QUIET:
        if _STDERR is not None:
            stream, nowhere = _STDERR
            saved = stream.value
            stream.value = nowhere
            try:
                yield
            finally:
                stream.value = saved
            return
        sys.stderr.flush()
        saved_fd = os.dup(2)
        try:
            with open(os.devnull, "wb") as null:
                os.dup2(null.fileno(), 2)
            yield
        finally:
            os.dup2(saved_fd, 2)
            os.close(saved_fd)


class _Later:
    """A file's documents, found again in its text when a finding asks for a position: libyaml's events of one
    document, as far as the path asked for (`tree.located`); all of them only to list every position."""

    def __init__(self, text: str, starts: list[int]) -> None:
        self.text, self.starts = text, starts
        self._lines: list[int] | None = None
        self._found: dict[int, dict[Path, Position | None]] = {}
        # Documents whose every position was listed (a copy of the map, a render cache's entry): one reading answers
        # each path after, not one reading per path.
        self._every: dict[int, dict[Path, Position]] = {}

    def _document(self, index: int) -> tuple[str, int]:
        """The text of a document, and the lines before it."""
        if self._lines is None:
            self._lines = list(itertools.accumulate(
                self.text.count("\n", a, b) for a, b in itertools.pairwise([0, *self.starts])))
        end = self.starts[index + 1] if index + 1 < len(self.starts) else len(self.text)
        return self.text[self.starts[index]:end], self._lines[index]

    def position(self, index: int, path: Path) -> Position | None:
        listed = self._every.get(index)
        if listed is not None:
            return listed.get(path)
        known = self._found.setdefault(index, {})
        if path not in known:
            text, before = self._document(index)
            try:
                found = tree.located(text, path)
            except yaml.YAMLError:  # the documents were told apart wrongly: every position from the file
                found = {p: (line - before, column) for p, (line, column) in self.every(index).items()}
            known.update({p: (line + before, column) for p, (line, column) in found.items()})
            known.setdefault(path, None)
        return known[path]

    def every(self, index: int) -> dict[Path, Position]:
        listed = self._every.get(index)
        if listed is None:
            text, before = self._document(index)
            alone = list(tree._yaml(text))
            listed = self._every[index] = (
                {p: (line + before, column) for p, (line, column) in alone[0].positions.items()}
                if len(alone) == 1 and alone[0].problem is None else dict(list(tree._yaml(self.text))[index].positions))
        return listed


class Positions(Mapping[Path, Position]):
    """The positions of one document, as `tree` finds them, each found when first asked for."""

    __slots__ = ("_index", "_later", "_prefix")

    def __init__(self, later: _Later, index: int, prefix: Path = ()) -> None:
        self._later, self._index, self._prefix = later, index, prefix

    def __getitem__(self, path: Path) -> Position:
        found = self._later.position(self._index, (*self._prefix, *path))
        if found is None:
            raise KeyError(path)
        return found

    def __iter__(self) -> Iterator[Path]:
        cut = len(self._prefix)
        return (p[cut:] for p in self._later.every(self._index) if p[:cut] == self._prefix)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __bool__(self) -> bool:
        return True  # a document has a root: no need to read it to say so

    def within(self, path: Path) -> Positions:
        """The positions of the value at `path`, relative to it (an item of a `kind: List`)."""
        return Positions(self._later, self._index, (*self._prefix, *path))
