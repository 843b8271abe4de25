"""Finding input files and turning their bytes into text, refusing what is not YAML text."""

from __future__ import annotations

import codecs
import dataclasses
import errno
import os
import stat
import sys
from collections.abc import Iterator, Sequence
from typing import BinaryIO

from sources import templates
from sources.tree import Position, position_of

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
    # Why a walked path cannot be read (it is reported, and the rest of the walk is read).
    problem: str | None = None
    # A directory with a kustomization file, met in a walk: what `kustomize build` renders of it is read.
    kustomization: bool = False


@dataclasses.dataclass(frozen=True)
class Text:
    """A file's text, or why it was refused."""

    source: Source
    text: str | None
    # Why the file was refused before parsing, and where.
    problem: str | None = None
    position: Position = (1, 1)
    # The file could not be read at all (as opposed to content refused).
    unreadable: bool = False


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
    found: list[tuple[tuple[str, ...], Source]] = []

    def key(path: str) -> tuple[str, ...]:
        return tuple(os.path.relpath(path, root).split(os.sep))

    def unlistable(err: OSError) -> None:
        # A subdirectory that cannot be listed: reported, and the walk goes on.
        path = err.filename or root
        found.append((key(path), Source(path, path, walked=True, problem=_reason(err))))

    kustomizations: list[str] = []
    for directory, subdirs, files in os.walk(root, onerror=unlistable):
        if templates.kustomization_file(directory) is not None:
            # Its files are what kustomize renders (patches are partial objects): the directory is read whole.
            kustomizations.append(directory)
            subdirs[:] = []
            continue
        subdirs[:] = [d for d in subdirs if d not in _SKIPPED_DIRS]
        for name in files:
            if name.lower().endswith(SUFFIXES):
                path = os.path.join(directory, name)
                found.append((key(path), Source(path, path, walked=True, problem=_unreadable(path))))
    found += [(key(d), Source(d, d, walked=True, kustomization=True)) for d in templates.roots(kustomizations)]
    # Sorted as a tree (component by component), as `ls -R` or an editor shows it.
    for _, source in sorted(found, key=lambda pair: pair[0]):
        yield source


def _unreadable(path: str) -> str | None:
    """Why a file met in a directory walk cannot be read, judged without opening it: opening a
    FIFO blocks until a writer comes, and a device can be endless."""
    try:
        mode = os.stat(path).st_mode
    except OSError as err:
        if os.path.islink(path) and err.errno == errno.ENOENT:
            return f"dangling symbolic link to {os.readlink(path)!r}"
        return _reason(err)
    if stat.S_ISREG(mode):
        return None
    what = ("a FIFO (named pipe)" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode)
            else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a regular file")
    return f"{what}, not read"


def _reason(err: OSError) -> str:
    if err.errno == errno.ELOOP:
        return "symbolic link loop"
    return err.strerror or str(err)


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
    if source.problem is not None:
        return Text(source, None, source.problem, unreadable=True)
    try:
        data = _read_file(source.path, max_bytes, regular_only=source.walked)
    except OSError as err:
        if source.walked:
            return Text(source, None, _reason(err), unreadable=True)
        raise InputError(f"{source.name}: {_reason(err)}") from None
    if data is None or len(data) > max_bytes:
        return _too_big(source, max_bytes)
    return decode(source, data)


def _read_file(path: str, max_bytes: int, *, regular_only: bool) -> bytes | None:
    """The file's bytes, or None when it is larger than max_bytes. A file named on the command
    line may be a pipe (`<(...)`); one met in a walk must be a regular file, and is opened
    non-blocking in case it was swapped for a FIFO since it was looked at."""
    extra = os.O_NONBLOCK if regular_only else 0
    with open(path, "rb", opener=lambda name, flags: os.open(name, flags | extra)) as handle:
        info = os.fstat(handle.fileno())
        if regular_only and not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, "not a regular file, not read", path)
        # Checked before reading: a huge file is refused without loading it.
        if info.st_size > max_bytes:
            return None
        return handle.read(max_bytes + 1)  # files that lie about their size (pipes, /proc)


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
