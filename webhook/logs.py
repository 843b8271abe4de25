"""One JSON object per line on stderr, for every logger (aiohttp's and asyncio's included), so
a traceback is a field of one line, never a dozen unparseable ones."""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any, TextIO

_STANDARD = frozenset(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime", "fields"}
# Attributes of a record made without `extra`: one with no more than these (and `fields`) has no extras to copy.
_PLAIN = len(logging.LogRecord("", 0, "", 0, "", None, None).__dict__)
# The line's encoder, configured once (json.dumps builds a new one per call for non-default options).
_ENCODE = json.JSONEncoder(default=str, ensure_ascii=False).encode


class JsonFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__()
        # The timestamp up to the second, remembered for the second it names: the webhook writes a line
        # per admission, and formatting the date costs more than the rest of a line's fields.
        self._second: tuple[int, str] = (-1, "")

    def _time(self, record: logging.LogRecord) -> str:
        # Rounded to the microsecond, then cut to the millisecond, as datetime's fromtimestamp and isoformat do.
        second = int(record.created)
        micros = round((record.created - second) * 1e6)
        if micros >= 1_000_000:
            second, micros = second + 1, micros - 1_000_000
        cached, text = self._second
        if cached != second:
            text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
            self._second = (second, text)
        return f"{text}.{micros // 1000:03d}Z"

    def format(self, record: logging.LogRecord) -> str:
        attributes = record.__dict__
        out: dict[str, Any] = {
            "time": self._time(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        fields = attributes.get("fields")
        if isinstance(fields, dict):
            out.update(fields)
        # Most records carry nothing besides the standard attributes and `fields`: counting them is enough.
        if len(attributes) > _PLAIN + ("fields" in attributes):
            extra = attributes.keys() - _STANDARD
            for key, value in attributes.items():
                if key in extra and not key.startswith("_"):
                    out.setdefault(key, value)
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return _ENCODE(out)


def setup(level: str = "info", stream: TextIO | None = None) -> None:
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    # The lines carry none of the caller, thread or process fields, so the per-record lookups of
    # them (a stack walk among them) are turned off: the logging HOWTO's "Optimization" settings.
    # The webhook writes a line per admission; they were a quarter of a line's cost.
    logging._srcfile = None
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
    # Handshake failures from scanners and probes without a client certificate are routine.
    logging.getLogger("asyncio").setLevel(logging.WARNING)
