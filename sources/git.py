"""Input files at a git revision, read with git's plumbing (no checkout, no work tree touched).

`git ls-tree` lists what a path holds at a revision (with each blob's id and size) and one
`git cat-file --batch` streams the blobs, so a revision of thousands of files costs two processes.
Files are named as the user would name them in the work tree (relative to the working directory),
and carry their blob id: the two sides of a diff parse an unchanged file once.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
from collections.abc import Sequence

from sources import files

GIT_TIMEOUT = 300.0


@dataclasses.dataclass(frozen=True)
class Blob:
    name: str
    oid: str
    size: int
    # Found under a directory rather than named (a walk's rules: suffixes, skipping files without our kinds).
    walked: bool


@dataclasses.dataclass(frozen=True)
class Range:
    base: str
    head: str


def parse_range(text: str) -> Range | None:
    """`BASE..HEAD` or `BASE...HEAD` (from their merge base, as `git diff` reads it); an empty side is HEAD."""
    for sep in ("...", ".."):
        if sep in text:
            base, head = text.split(sep, 1)
            if sep == "...":
                return Range(f"{base or 'HEAD'}...{head or 'HEAD'}", head or "HEAD")
            return Range(base or "HEAD", head or "HEAD")
    return None


def _git(args: Sequence[str], cwd: str, data: bytes | None = None) -> bytes:
    try:
        done = subprocess.run(["git", *args], cwd=cwd, input=data, capture_output=True, timeout=GIT_TIMEOUT,
                              check=False)
    except FileNotFoundError:
        raise files.InputError("git is not installed (needed to read revisions)") from None
    except subprocess.TimeoutExpired:
        raise files.InputError(f"git {args[0]} took longer than {GIT_TIMEOUT:.0f}s") from None
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise files.InputError(f"git {args[0]}: {message[-1] if message else f'exit {done.returncode}'}")
    return done.stdout


def toplevel(path: str) -> str:
    directory = path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise files.InputError(f"{path}: no such directory in the work tree to find its git repository")
    return _git(["rev-parse", "--show-toplevel"], directory).decode().strip()


def commit(repo: str, revision: str) -> str:
    """The commit a revision names; `A...B` is the merge base of A and B."""
    if "..." in revision:
        a, b = revision.split("...", 1)
        return _git(["merge-base", commit(repo, a), commit(repo, b)], repo).decode().strip()
    try:
        return _git(["rev-parse", "--verify", "--quiet", "--end-of-options", f"{revision}^{{commit}}"],
                    repo).decode().strip()
    except files.InputError:
        raise files.InputError(f"{revision!r} is not a commit of the repository at {repo}") from None


def listing(repo: str, rev: str, paths: Sequence[str]) -> tuple[list[Blob], list[str]]:
    """The files under `paths` (relative to the working directory) at commit `rev`, sorted as a walk sorts
    them, and notes on what was left out. A path absent at this revision holds nothing there."""
    out: list[Blob] = []
    notes: list[str] = []
    for path in paths:
        rel = os.path.relpath(os.path.abspath(path), repo)
        whole = rel == "."
        raw = _git(["ls-tree", "-r", "-z", "-l", "--full-tree", rev, "--", *(() if whole else (rel,))], repo)
        for record in raw.split(b"\0"):
            if not record:
                continue
            meta, name = record.decode("utf-8", "surrogateescape").split("\t", 1)
            mode, kind, oid, size = meta.split()
            named = name == rel
            if not named and not name.lower().endswith(files.SUFFIXES):
                continue
            shown = os.path.relpath(os.path.join(repo, name))
            if kind != "blob":
                notes.append(f"{shown} at {rev[:12]}: a {kind} (submodule), not read")
            elif mode == "120000":
                notes.append(f"{shown} at {rev[:12]}: a symbolic link, not read")
            else:
                out.append(Blob(shown, oid, int(size), walked=not named))
    # Overlapping paths (a directory and a file in it) name a file once.
    unique = {b.name: b for b in reversed(out)}
    return sorted(unique.values(), key=lambda b: tuple(b.name.split(os.sep))), notes


def read(repo: str, blobs: Sequence[Blob], max_bytes: int) -> list[files.Text]:
    """The blobs' text, decoded as files are; one larger than `max_bytes` is refused unread."""
    wanted = [b for b in blobs if b.size <= max_bytes]
    contents: dict[str, bytes] = {}
    if wanted:
        stream = _git(["cat-file", "--batch"], repo, "".join(f"{b.oid}\n" for b in wanted).encode())
        at = 0
        for blob in wanted:
            header_end = stream.index(b"\n", at)
            size = int(stream[at:header_end].split()[2])
            contents[blob.oid] = stream[header_end + 1:header_end + 1 + size]
            at = header_end + 1 + size + 1
    out = []
    for blob in blobs:
        source = files.Source(blob.name, None, walked=blob.walked)
        data = contents.get(blob.oid)
        if data is None:
            out.append(files.Text(source, None, f"file is larger than {max_bytes} bytes (see --max-file-size); "
                                                "not read"))
        else:
            out.append(files.decode(source, data))
    return out
