"""Replacing files so that a reader, or an attacker with write access to the directory, never
sees a key it should not.

Every file is written to a fresh temporary file in the same directory (created exclusively,
never following a symlink, readable by its owner only from the start), synced, then renamed
over the target. A stale temporary file or a symlink planted where the temporary or the target
would be is never opened: the name is random, and the rename replaces a symlink rather than
writing through it.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

PRIVATE = 0o600
PUBLIC = 0o644


def write_private(path: Path, data: bytes) -> None:
    """A key or a Secret holding one: mode 0600."""
    _replace(path, data, PRIVATE)


def write_public(path: Path, data: bytes) -> None:
    """A certificate or a manifest: mode 0644, written the same careful way so that readers
    never see a half-written file."""
    _replace(path, data, PUBLIC)


def _replace(path: Path, data: bytes, mode: int) -> None:
    # mkstemp opens with O_CREAT|O_EXCL|O_NOFOLLOW and mode 0600, whatever the umask.
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        try:
            if mode != PRIVATE:
                os.fchmod(fd, mode)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _sync_directory(path.parent)


def _sync_directory(directory: Path) -> None:
    """Makes the rename itself durable (a crash could otherwise leave the old name)."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)
