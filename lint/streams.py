"""The output streams of a run, kept from ending it when their reader goes away (`overlay-lint check . | head -1`).

A closed pipe is not the run's failure: the command runs on, what it would still print is dropped, and its exit
status is its own (1 with errors, else 0), so `set -o pipefail` never sees 0 over errors and a clean run is not
turned into a failure (141, which a shell gives a process killed by SIGPIPE, would fail a clean CI step that trims
its log). Once the reader has gone, the stream's descriptor is pointed at /dev/null, as the Python documentation
advises for SIGPIPE, so the interpreter's last flush at exit raises no second BrokenPipeError.
"""

from __future__ import annotations

import io
import os
from typing import TextIO, cast


class Guarded(io.TextIOBase):
    """`stream`, writing until its reader goes away and dropping everything after."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__()
        self.stream = stream
        self.gone = False

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return not self.gone and self.stream.isatty()

    def write(self, text: str) -> int:
        if not self.gone:
            try:
                self.stream.write(text)
            except BrokenPipeError:
                self._reader_gone()
        return len(text)

    def flush(self) -> None:
        if not self.gone:
            try:
                self.stream.flush()
            except BrokenPipeError:
                self._reader_gone()

    def _reader_gone(self) -> None:
        self.gone = True
        try:
            descriptor = self.stream.fileno()
        except (OSError, ValueError):
            return  # an in-memory stream: nothing flushes it at exit
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, descriptor)
        finally:
            os.close(devnull)


def guard(stream: TextIO) -> TextIO:
    """`stream` Guarded, typed as the text stream it stands for (io.TextIOBase is one at run time)."""
    return cast(TextIO, Guarded(stream))
