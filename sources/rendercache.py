"""Renders kept by the content of everything they read, so a second run over an unchanged tree renders nothing.

What a build reads is worked out from the kustomizations themselves: the built directory's whole tree, and each
directory or file a kustomization there names (resources, bases, components, patches, generators' files), followed
through the kustomizations those hold. A kustomization naming a remote base is never cached (its content is not
here to hash). The key is the hash of the renderer (its path, size and modification time), the amendment, and
every such file's path and content. Entries live in `$OVERLAY_GUARD_CACHE/renders` (or
`$OVERLAY_GUARD_RENDER_CACHE`; `off` turns the cache off), the least recently used beyond `MAX_ENTRIES` or
`MAX_BYTES` removed."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from sources import kustomize, templates

MAX_ENTRIES = 512
MAX_BYTES = 64 * 1024 * 1024
_SUFFIX = ".json"
# kustomization fields holding a path (or a list of them) to a file or directory the build reads.
_PATH_LISTS = ("resources", "bases", "components", "crds", "patchesStrategicMerge")
_PATH_ENTRIES = ("patches", "patchesJson6902")
_GENERATORS = ("configMapGenerator", "secretGenerator")


def location() -> Path | None:
    chosen = os.environ.get("OVERLAY_GUARD_RENDER_CACHE")
    if chosen == "off":
        return None
    if chosen:
        return Path(chosen)
    base = os.environ.get("OVERLAY_GUARD_CACHE") or str(Path.home() / ".cache" / "overlay-guard")
    return Path(base) / "renders"


@dataclasses.dataclass(frozen=True)
class Render:
    documents: tuple[kustomize.Traced, ...]
    # What the build may have read (real paths); empty when that could not be told (a remote base).
    files: tuple[str, ...]


def build(directory: str, amendment: kustomize.Amendment, command: Sequence[str],
          finish: Callable[[str], list[kustomize.Traced]], *, root: str | None = None, extra: Sequence[str] = (),
          salt: str = "") -> Render:
    """`kustomize.build` and `finish` (the rendered stream to objects), answered from the cache when nothing the
    build reads has changed since. The objects are kept, not the stream: reading them back is JSON's decoder, not
    YAML's. `salt`: whatever else `finish` depends on."""
    files = read_files(directory, extra)
    where = location()
    if files is None or where is None:
        return Render(tuple(finish(kustomize.build(directory, amendment, command, root))), tuple(files or ()))
    entry = key(command, amendment, [os.path.realpath(directory), os.path.realpath(root or "/"), *files],
                f"{directory}\0{salt}")
    cached = get(where, entry)
    documents = _decode(cached) if cached is not None else None
    if documents is None:
        documents = finish(kustomize.build(directory, amendment, command, root))
        encoded = _encode(documents)
        if encoded is not None:
            put(where, entry, encoded)
    return Render(tuple(documents), tuple(files))


def _encode(documents: Sequence[kustomize.Traced]) -> str | None:
    """JSON of the objects, or None when JSON cannot hold them as they are (a key that is not a string)."""
    rows = [{"obj": d.obj, "plain": [[list(p), t] for p, t in d.plain.items()], "origin": d.origin,
             "configuredIn": d.configured_in, "patchedBy": list(d.patched_by)} for d in documents]
    try:
        text = json.dumps(rows)
    except (TypeError, ValueError):
        return None
    return text if [r["obj"] for r in json.loads(text)] == [d.obj for d in documents] else None


def _decode(text: str) -> list[kustomize.Traced] | None:
    try:
        rows = json.loads(text)
        return [kustomize.Traced(r["obj"], {tuple(p): t for p, t in r["plain"]}, r["origin"], r["configuredIn"],
                                 tuple(r["patchedBy"])) for r in rows]
    except (ValueError, TypeError, KeyError):
        return None


def read_files(root: str, extra: Sequence[str] = ()) -> list[str] | None:
    """Every file a build of `root` may read (real paths, sorted), or None when it names a remote base.
    `extra` are more directories or files it names (a generated kustomization's resources)."""
    found: set[str] = set()
    pending = [root, *extra]
    seen: set[str] = set()
    while pending:
        path = os.path.realpath(pending.pop())
        if path in seen:
            continue
        seen.add(path)
        if os.path.isfile(path):
            found.add(path)
            continue
        for here, subdirs, names in os.walk(path):
            subdirs.sort()
            for name in names:
                found.add(os.path.realpath(os.path.join(here, name)))
            kfile = templates.kustomization_file(here)
            content = kustomize.read_kustomization(kfile) if kfile is not None else None
            if content is None:
                continue
            named = list(_named(content))
            if any(templates.is_remote(n) for n in named):
                return None
            pending += [os.path.join(here, n) for n in named if os.path.exists(os.path.join(here, n))]
    return sorted(found)


def _named(content: Mapping[str, Any]) -> Iterator[str]:
    for key in _PATH_LISTS:
        entries = content.get(key)
        yield from (e for e in entries if isinstance(e, str)) if isinstance(entries, list) else ()
    for key in _PATH_ENTRIES:
        entries = content.get(key)
        for entry in entries if isinstance(entries, list) else ():
            if isinstance(entry, Mapping) and isinstance(entry.get("path"), str):
                yield entry["path"]
    for key in _GENERATORS:
        entries = content.get(key)
        for entry in entries if isinstance(entries, list) else ():
            if isinstance(entry, Mapping):
                for field in ("files", "envs"):
                    values = entry.get(field)
                    # `files` entries may be `key=path`.
                    yield from (v.split("=", 1)[-1] for v in values if isinstance(v, str)) \
                        if isinstance(values, list) else ()


def key(command: Sequence[str], amendment: kustomize.Amendment, files: Sequence[str], salt: str = "") -> str:
    """`files` first names the built directory and the tree it may reach, whose content is not hashed."""
    digest = hashlib.sha256()
    tool = shutil.which(command[0]) or command[0]
    try:
        status = os.stat(tool)
        digest.update(f"{tool}\0{status.st_size}\0{status.st_mtime_ns}\0".encode())
    except OSError:
        digest.update(f"{tool}\0".encode())
    digest.update(("\0".join(command) + "\0" + amendment.key() + "\0" + salt + "\0").encode())
    for path in files:
        digest.update(path.encode("utf-8", "surrogateescape") + b"\0")
        if not os.path.isfile(path):
            continue
        try:
            with open(path, "rb") as handle:
                digest.update(hashlib.sha256(handle.read()).digest())
        except OSError:
            digest.update(b"unreadable")
    return digest.hexdigest()


def get(where: Path, entry: str) -> str | None:
    path = where / (entry + _SUFFIX)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    with contextlib.suppress(OSError):
        os.utime(path)  # least recently used goes first
    return text


def put(where: Path, entry: str, text: str) -> None:
    """Written whole or not at all (a rename), so concurrent runs never read half an entry; failures to write
    only cost the next run a render."""
    try:
        where.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=where, prefix=".tmp-")
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(temporary, where / (entry + _SUFFIX))
        _prune(where)
    except OSError:
        return


def _prune(where: Path) -> None:
    entries = []
    for path in where.glob("*" + _SUFFIX):
        try:
            status = path.stat()
        except OSError:
            continue
        entries.append((status.st_mtime_ns, status.st_size, path))
    entries.sort(reverse=True)
    total = 0
    for count, (_, size, path) in enumerate(entries):
        total += size
        if count >= MAX_ENTRIES or total > MAX_BYTES:
            path.unlink(missing_ok=True)
