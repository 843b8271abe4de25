"""Finding input files and turning their bytes into text, refusing what is not YAML text."""

from __future__ import annotations

import codecs
import dataclasses
import os
import sys
from collections.abc import Iterator, Sequence
from typing import BinaryIO

from lint.tree import Position, position_of

DEFAULT_MAX_BYTES = 10 * 1024 * 1024
SUFFIXES = (".yaml", ".yml", ".json")
STDIN = "-"
STDIN_NAME = "<stdin>"
# Version-control metadata never holds manifests and can hold many files.
_SKIPPED_DIRS = frozenset({".git", ".hg", ".svn"})
_SNIFF = 8192


class InputError(Exception):
    """An input that cannot be read at all (missing, unreadable): exit status 2."""


@dataclasses.dataclass(frozen=True)
class Source:
    """One input file: the name findings show, and where to read it."""

    name: str
    path: str | None  # None for stdin
    # Found by walking a directory rather than named by the user.
    walked: bool = False


@dataclasses.dataclass(frozen=True)
class Text:
    source: Source
    text: str | None
    # Why the file was refused before parsing, and where.
    problem: str | None = None
    position: Position = (1, 1)


def discover(args: Sequence[str]) -> Iterator[Source]:
    """Files named directly are read whatever their suffix; directories are walked recursively
    for YAML and JSON files in sorted order, so output is deterministic."""
    for arg in args:
        if arg == STDIN:
            yield Source(STDIN_NAME, None)
        elif os.path.isdir(arg):
            yield from _walk(arg)
        elif os.path.exists(arg) or os.path.islink(arg):
            yield Source(arg, arg)
        else:
            raise InputError(f"{arg}: no such file or directory")


def _walk(root: str) -> Iterator[Source]:
    def fail(err: OSError) -> None:
        raise InputError(f"{err.filename or root}: {err.strerror or err}")

    found: list[tuple[tuple[str, ...], str]] = []
    for directory, subdirs, files in os.walk(root, onerror=fail):
        subdirs[:] = [d for d in subdirs if d not in _SKIPPED_DIRS]
        for name in files:
            if name.lower().endswith(SUFFIXES):
                path = os.path.join(directory, name)
                found.append((tuple(os.path.relpath(path, root).split(os.sep)), path))
    # Sorted as a tree (component by component), as `ls -R` or an editor shows it.
    for _, path in sorted(found):
        yield Source(path, path, walked=True)


def read(source: Source, max_bytes: int, stdin: BinaryIO | None = None) -> Text:
    if source.path is None:
        stream = stdin if stdin is not None else getattr(sys.stdin, "buffer", None)
        if stream is None:
            raise InputError("-: there is no standard input to read")
        try:
            data = stream.read(max_bytes + 1)
        except OSError as err:
            raise InputError(f"-: {err.strerror or err}") from None
        if len(data) > max_bytes:
            return _too_big(source, max_bytes)
        return decode(source, data)
    try:
        with open(source.path, "rb") as handle:
            # Checked before reading: a huge file is refused without loading it.
            if os.fstat(handle.fileno()).st_size > max_bytes:
                return _too_big(source, max_bytes)
            data = handle.read(max_bytes + 1)  # files that lie about their size (pipes, /proc)
    except OSError as err:
        raise InputError(f"{source.name}: {err.strerror or err}") from None
    if len(data) > max_bytes:
        return _too_big(source, max_bytes)
    return decode(source, data)


def _too_big(source: Source, max_bytes: int) -> Text:
    return Text(source, None, f"file is larger than {max_bytes} bytes (see --max-file-size); not read")


def decode(source: Source, data: bytes) -> Text:
    """UTF-8 (with or without BOM), or UTF-16/32 announced by a BOM, as YAML allows."""
    for bom, codec in ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"),
                       (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16")):
        if data.startswith(bom):
            try:
                return Text(source, data.decode(codec))
            except UnicodeDecodeError:
                return Text(source, None, f"invalid {codec.upper()} text")
    nul = data.find(b"\0", 0, _SNIFF)
    if nul >= 0:
        return Text(source, None, "binary file (contains NUL bytes), not YAML or JSON",
                    _byte_position(data, nul))
    try:
        return Text(source, data.decode("utf-8-sig"))
    except UnicodeDecodeError as err:
        return Text(source, None, f"not UTF-8 text (byte 0x{data[err.start]:02x})",
                    _byte_position(data, err.start))


def _byte_position(data: bytes, offset: int) -> Position:
    head = data[:offset].decode("utf-8", errors="replace")
    return position_of(head, len(head))


def parse_size(text: str) -> int:
    """A byte count with an optional Ki/Mi/Gi (or K/M/G) suffix."""
    units = {"ki": 1024, "mi": 1024 ** 2, "gi": 1024 ** 3, "k": 1000, "m": 1000 ** 2, "g": 1000 ** 3}
    raw = text.strip().lower().removesuffix("b")
    for suffix, factor in units.items():
        if raw.endswith(suffix):
            number, multiplier = raw[: -len(suffix)], factor
            break
    else:
        number, multiplier = raw, 1
    value = int(number) * multiplier
    if value <= 0:
        raise ValueError(text)
    return value
