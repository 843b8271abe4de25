"""One JSON object per line on stderr, for every logger (aiohttp's and asyncio's included), so
a traceback is a field of one line, never a dozen unparseable ones."""

from __future__ import annotations

import datetime
import json
import logging
import sys
from typing import Any, TextIO

_STANDARD = frozenset(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime", "fields"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": datetime.datetime.fromtimestamp(record.created, datetime.UTC).isoformat(
                timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        fields = record.__dict__.get("fields")
        if isinstance(fields, dict):
            out.update(fields)
        # Set arithmetic first: most records have no attribute besides the standard ones and `fields`.
        extra = record.__dict__.keys() - _STANDARD
        if extra:
            for key, value in record.__dict__.items():
                if key in extra and not key.startswith("_"):
                    out.setdefault(key, value)
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str, ensure_ascii=False)


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
