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

    def _time(self, created: float) -> str:
        # Rounded to the microsecond, then cut to the millisecond, as datetime's fromtimestamp and isoformat do.
        second = int(created)
        micros = round((created - second) * 1e6)
        if micros >= 1_000_000:
            second, micros = second + 1, micros - 1_000_000
        cached, text = self._second
        if cached != second:
            text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
            self._second = (second, text)
        return f"{text}.{micros // 1000:03d}Z"

    def head(self, created: float, level: str, logger: str, msg: str) -> dict[str, Any]:
        """A line's first fields; `level` as logging names it (INFO)."""
        return {"time": self._time(created), "level": level.lower(), "logger": logger, "msg": msg}

    def format(self, record: logging.LogRecord) -> str:
        attributes = record.__dict__
        out = self.head(record.created, record.levelname, record.name, record.getMessage())
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


class JsonHandler(logging.StreamHandler[TextIO]):
    """The handler `setup` installs: a JSON line per record, and (`info`) a line per request without a record."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__(stream)
        self.setFormatter(JsonFormatter())

    def write(self, logger: str, msg: str, fields: dict[str, Any]) -> None:
        """The line `format` writes for an INFO record of `logger` with `msg` and `fields` (and no extras)."""
        formatter = self.formatter
        assert isinstance(formatter, JsonFormatter)
        created = time.time()
        out = formatter.head(created, _INFO, logger, msg)
        out.update(fields)
        self.acquire()
        try:
            self.stream.write(_ENCODE(out) + self.terminator)
            self.flush()
        except RecursionError:
            raise
        except Exception:
            # As emit() reports a line it cannot write: the record is made only then.
            record = logging.makeLogRecord({"name": logger, "msg": msg, "levelno": logging.INFO, "levelname": _INFO,
                                            "created": created, "fields": fields})
            self.handleError(record)
        finally:
            self.release()


_INFO = logging.getLevelName(logging.INFO)


def info(logger: logging.Logger, msg: str, fields: dict[str, Any]) -> None:
    """`logger.info(msg, extra={"fields": fields})`, for the webhook's line per request. When the record would reach
    only the handler `setup` installed, that handler writes the line itself: the Logger's record and its walk past
    levels, filters and handlers were more than half of a line's cost. Anything else set up since (a test's log
    capture, another handler or a filter) gets the record as usual."""
    handler = _sole_handler(logger)
    if handler is None:
        logger.info(msg, extra={"fields": fields})
    elif logger.isEnabledFor(logging.INFO) and handler.level <= logging.INFO:
        handler.write(logger.name, msg, fields)


def _sole_handler(logger: logging.Logger) -> JsonHandler | None:
    """The JSON handler when it is the only place a record of `logger` goes, as Logger.callHandlers walks them."""
    node: logging.Logger | None = logger
    while node is not None:
        if node.disabled or node.filters:
            return None
        if node.handlers:
            handler = node.handlers[0]
            if (node.parent is None and len(node.handlers) == 1 and isinstance(handler, JsonHandler)
                    and not handler.filters and type(handler.formatter) is JsonFormatter):
                return handler
            return None
        if not node.propagate:
            return None
        node = node.parent
    return None


def setup(level: str = "info", stream: TextIO | None = None) -> None:
    handler = JsonHandler(stream or sys.stderr)
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
